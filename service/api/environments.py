"""``/v1/environments``: what can be played, with config schemas and reward components."""

from __future__ import annotations

from fastapi import APIRouter

from wander.client.models import EnvInfo, EnvironmentsResponse
from wander.service.api.deps import CatalogDep
from wander.service.api.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1/environments", tags=["environments"], responses=ERROR_RESPONSES)


@router.get("")
async def list_environments(catalog: CatalogDep) -> EnvironmentsResponse:
    """Every environment offered, and the installed ones that cannot be (with why)."""
    return EnvironmentsResponse(
        environments=catalog.environments(), unavailable=catalog.unavailable()
    )


@router.get("/{name:path}")  # adapters' names hold slashes: rg/basic_arithmetic
async def get_environment(name: str, catalog: CatalogDep) -> EnvInfo:
    return catalog.environment(name)
