"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio
import os

from fastapi import APIRouter, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)
from wander.service.api.deps import ArchiveDep, EngineDep
from wander.service.api.errors import ERROR_RESPONSES

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/metrics", response_class=Response, include_in_schema=False)
def metrics() -> Response:
    """Prometheus metrics (of all workers, with ``PROMETHEUS_MULTIPROC_DIR`` set)."""
    registry = REGISTRY
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz", responses={503: ERROR_RESPONSES[503]})
async def readyz(engine: EngineDep, archive: ArchiveDep) -> dict[str, str]:
    """The process can serve: the episode store answers (else 503 ``store_unavailable``)
    and the archive database answers, migrated (else 503 ``database_unavailable``)."""
    await engine.store.ping()
    await asyncio.to_thread(archive.ping)
    return {"status": "ready"}
