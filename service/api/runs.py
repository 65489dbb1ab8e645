"""``/v1/runs``: archived episodes by run label — summaries, listings and SFT exports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from wander.client.models import ArchivedEpisodesPage, RunsResponse, RunSummary
from wander.service.api.deps import ArchiveDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archive import EpisodeFilter

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=ERROR_RESPONSES)
# Run labels may hold slashes ("org/model/1"), hence the path converters below; the
# episodes route comes first so that ".../episodes" is never read as a label.

JSONL_MEDIA_TYPE = "application/x-ndjson"


@router.get("")
def list_runs(archive: ArchiveDep) -> RunsResponse:
    """Every run label in the archive, with its episode count and time span."""
    return RunsResponse(runs=archive.runs())


@router.get(
    "/{run:path}/episodes",
    response_model=ArchivedEpisodesPage,
    responses={200: {"content": {JSONL_MEDIA_TYPE: {}}}},
)
def run_episodes(
    run: str,
    archive: ArchiveDep,
    env: str | None = None,
    status: Literal["done", "aborted"] | None = None,
    outcome: Annotated[
        list[str] | None, Query(description="Keep these outcomes (repeatable).")
    ] = None,
    exclude_outcome: Annotated[
        list[str] | None, Query(description="Drop these outcomes (repeatable).")
    ] = None,
    min_reward: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    max_reward: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
    output: Annotated[
        Literal["json", "jsonl"],
        Query(
            alias="format",
            description="`jsonl`: every matching episode as a chat transcript "
            '`{"messages": [...]}` per line (no paging), for SFT.',
        ),
    ] = "json",
) -> Any:
    """A page of a run's archived episodes, oldest first, or all of them as JSON lines."""
    filters = EpisodeFilter(
        env=env,
        status=status,
        outcome=tuple(outcome or ()),
        exclude_outcome=tuple(exclude_outcome or ()),
        min_reward=min_reward,
        max_reward=max_reward,
    )
    if output == "jsonl":
        archive.ping()  # fail with a 503 now rather than in the middle of the stream
        return StreamingResponse(archive.transcripts(run, filters), media_type=JSONL_MEDIA_TYPE)
    return archive.episodes(run, filters, limit=limit, offset=offset)


@router.get("/{run:path}")
def run_summary(run: str, archive: ArchiveDep) -> RunSummary:
    """Reward statistics, component means and metric distributions of a run."""
    return archive.summary(run)
