"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import EngineDep
from service.api.errors import ERROR_RESPONSES

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: ERROR_RESPONSES[503]})
async def readyz(engine: EngineDep) -> dict[str, str]:
    """The process can serve: its episode store answers (503 ``store_unavailable`` if not)."""
    await engine.store.ping()
    return {"status": "ready"}
