"""``/v1/episodes`` and ``/v1/step``: create, step, score, read and abort episodes."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from client.models import (
    BatchStepRequest,
    BatchStepResponse,
    CreateEpisodesRequest,
    CreateEpisodesResponse,
    EpisodeRecord,
    Score,
    StepRequest,
    StepResult,
)
from service.api.deps import EngineDep
from service.api.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1", tags=["episodes"], responses=ERROR_RESPONSES)


@router.post("/episodes", status_code=status.HTTP_201_CREATED)
async def create_episodes(body: CreateEpisodesRequest, engine: EngineDep) -> CreateEpisodesResponse:
    """Reset: ``n`` episodes of one example, sharing its seed (a GRPO group)."""
    return CreateEpisodesResponse(episodes=await engine.create(body))


@router.post("/episodes/{episode_id}/step")
async def step_episode(episode_id: str, body: StepRequest, engine: EngineDep) -> StepResult:
    """Apply one action. Pass ``turn`` so that a retried request applies at most once."""
    return await engine.step(episode_id, body.action, body.turn)


@router.post("/step")
async def step_batch(body: BatchStepRequest, engine: EngineDep) -> BatchStepResponse:
    """Apply many steps at once; each result is a ``StepResult`` or ``{episode_id, error}``."""
    return BatchStepResponse(results=await engine.step_many(body.steps))


@router.get("/episodes/{episode_id}/score")
async def score_episode(episode_id: str, engine: EngineDep, partial: bool = False) -> Score:
    """The episode's score; 409 while it is being played unless ``partial=true``."""
    return await engine.score(episode_id, partial=partial)


@router.get("/episodes/{episode_id}")
async def get_episode(episode_id: str, engine: EngineDep) -> EpisodeRecord:
    """The full record: messages, step rewards, score, public state, timestamps."""
    return await engine.episode(episode_id)


@router.delete("/episodes/{episode_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_episode(episode_id: str, engine: EngineDep) -> Response:
    """Abort the episode (a finished one stays as it is)."""
    await engine.abort(episode_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
