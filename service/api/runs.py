"""``/v1/runs``: archived episodes by run label — summaries, listings and SFT exports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from wander.client.models import ArchivedEpisodesPage, RunsPage, RunSummary, Text
from wander.service.api.auth import audit, principal_of
from wander.service.api.deps import ArchiveDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archive import EpisodeFilter

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=ERROR_RESPONSES)
# Run labels may hold slashes ("org/model/1"), hence the path converters below; the
# episodes route comes first so that ".../episodes" is never read as a label.

JSONL_MEDIA_TYPE = "application/x-ndjson"
MAX_OFFSET = 2**63 - 1
"""SQLite's INTEGER and PostgreSQL's BIGINT, which bind OFFSET, are signed 64-bit:
one past this is a driver error, not an empty page."""
PageLimit = Annotated[int, Query(ge=1, le=1000, description="Page size.")]
PageOffset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip.")]
RunLabel = Annotated[Text, Path(description="The run label (it may hold slashes).")]


async def caller_scope(request: Request) -> str | None:
    """The only tenant whose runs the caller sees (None: every tenant's, for an admin
    and on an open service)."""
    return principal_of(request).scope


Scope = Annotated[str | None, Depends(caller_scope)]


@router.get("")
def list_runs(
    archive: ArchiveDep, scope: Scope, limit: PageLimit = 100, offset: PageOffset = 0
) -> RunsPage:
    """A page of the runs in the archive, oldest first, each with its tenant, episode
    count, environments and time span; ``total`` counts them all."""
    return archive.runs(tenant=scope, limit=limit, offset=offset)


@router.get(
    "/{run:path}/episodes",
    response_model=ArchivedEpisodesPage,
    responses={200: {"content": {JSONL_MEDIA_TYPE: {}}}},
)
def run_episodes(
    request: Request,
    run: RunLabel,
    archive: ArchiveDep,
    scope: Scope,
    env: Text | None = None,
    status: Literal["done", "aborted"] | None = None,
    outcome: Annotated[
        list[Text] | None, Query(description="Keep these outcomes (repeatable).")
    ] = None,
    exclude_outcome: Annotated[
        list[Text] | None, Query(description="Drop these outcomes (repeatable).")
    ] = None,
    min_reward: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    max_reward: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: PageLimit = 100,
    offset: PageOffset = 0,
    output: Annotated[
        Literal["json", "jsonl"],
        Query(
            alias="format",
            description="`jsonl`: every matching episode as a chat transcript "
            '`{"messages": [...]}` per line (no paging), for SFT.',
        ),
    ] = "json",
) -> Any:
    """A page of a run's archived episodes, oldest first, or all of them as JSON lines.

    404 ``run_not_found`` when no archived episode has the label; a known run that no
    episode of matches the filters gives an empty page (or no lines)."""
    filters = EpisodeFilter(
        env=env,
        status=status,
        outcome=tuple(outcome or ()),
        exclude_outcome=tuple(exclude_outcome or ()),
        min_reward=min_reward,
        max_reward=max_reward,
    )
    if output == "jsonl":
        # A 503 or a 404 now, rather than a stream that breaks off or says nothing.
        archive.ping()
        archive.require_run(run, tenant=scope)
        audit(request, exported=run)
        return StreamingResponse(
            archive.transcripts(run, filters, tenant=scope), media_type=JSONL_MEDIA_TYPE
        )
    page = archive.episodes(run, filters, tenant=scope, limit=limit, offset=offset)
    if page.total == 0:
        archive.require_run(run, tenant=scope)
    return page


@router.get("/{run:path}")
def run_summary(run: RunLabel, archive: ArchiveDep, scope: Scope) -> RunSummary:
    """Reward statistics, component means and metric distributions of a run."""
    return archive.summary(run, tenant=scope)
