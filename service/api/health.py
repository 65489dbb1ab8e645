"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

from wander.service import metrics as service_metrics
from wander.service.api.deps import ArchiveDep, EngineDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archiver import Archiver
from wander.service.errors import ArchiveBacklog, StoreUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/metrics", response_class=Response, include_in_schema=False)
async def metrics(engine: EngineDep) -> Response:
    """Prometheus metrics (of all workers, with ``PROMETHEUS_MULTIPROC_DIR`` set). The live
    episodes are counted by the store now; while it is down, the last count stands."""
    with contextlib.suppress(StoreUnavailable):
        service_metrics.set_live_episodes(await engine.store.live())
    registry = REGISTRY
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    text = await asyncio.to_thread(generate_latest, registry)
    return Response(text, media_type=CONTENT_TYPE_LATEST)


async def get_archiver(request: Request) -> Archiver:
    archiver: Archiver = request.app.state.archiver
    return archiver


@router.get("/readyz", responses={503: ERROR_RESPONSES[503]})
async def readyz(
    engine: EngineDep, archive: ArchiveDep, archiver: Annotated[Archiver, Depends(get_archiver)]
) -> dict[str, str]:
    """The process can serve: the episode store answers (else 503 ``store_unavailable``),
    the archive database answers, migrated (else 503 ``database_unavailable``), and the
    archive makes progress (else 503 ``archive_stalled``: every attempt has failed for a
    minute, though the database answers; the error says why). Ready with new episodes
    refused while the archive's backlog is past its bound (``archive``, why): its live
    episodes still step here, and every replica shares the backlog."""
    await engine.store.ping()
    await asyncio.to_thread(archive.ping)
    archiver.check_progress()
    with contextlib.suppress(ArchiveBacklog):
        await engine.backlog.admit()
    refusal = engine.backlog.refusal()
    return {"status": "ready", **({"archive": refusal} if refusal else {})}
