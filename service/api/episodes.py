"""``/v1/episodes`` and ``/v1/step``: create, step, score, read and abort episodes.

Creating and stepping are the hot path (a trainer sends thousands of steps a
second): their routes are ``JSONBodyRoute``\\ s, which validate the body straight
from its bytes, and they answer the engine's plain dicts encoded with orjson
rather than validating them against the response models (which still document
them in the OpenAPI schema; the tests parse every response with them).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request, Response, status

from wander.client.models import (
    BatchStepRequest,
    BatchStepResponse,
    CreateEpisodesRequest,
    CreateEpisodesResponse,
    EpisodeRecord,
    Score,
    StepRequest,
    StepResult,
)
from wander.service.api.auth import audit, principal_of
from wander.service.api.deps import EngineDep, engine_of
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.api.routing import JSONBodyRoute

router = APIRouter(
    prefix="/v1", tags=["episodes"], responses=ERROR_RESPONSES, route_class=JSONBodyRoute
)


def _json(content: Any, status_code: int = status.HTTP_200_OK) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


# The hot routes take the engine from the request rather than as a dependency:
# with no dependency to solve, ``JSONBodyRoute`` calls them directly.


@router.post(
    "/episodes", status_code=status.HTTP_201_CREATED, response_model=CreateEpisodesResponse
)
async def create_episodes(request: Request, body: CreateEpisodesRequest) -> Response:
    """Reset: ``n`` episodes of one example, sharing its seed (a GRPO group)."""
    episodes = await engine_of(request).create(body, principal_of(request))
    audit(request, env=body.env, run=body.run, episode_ids=[e["id"] for e in episodes])
    return _json({"episodes": episodes}, status.HTTP_201_CREATED)


@router.post("/episodes/{episode_id}/step", response_model=StepResult)
async def step_episode(request: Request, episode_id: str, body: StepRequest) -> Response:
    """Apply one action. Pass ``turn`` so that a retried request applies at most once."""
    principal = principal_of(request)
    return _json(await engine_of(request).step(episode_id, body.action, body.turn, principal))


@router.post("/step", response_model=BatchStepResponse)
async def step_batch(request: Request, body: BatchStepRequest) -> Response:
    """Apply many steps at once; each result is a ``StepResult`` or ``{episode_id, error}``."""
    audit(request, episode_ids=[step.episode_id for step in body.steps])
    results = await engine_of(request).step_many(body.steps, principal_of(request))
    return _json({"results": results})


@router.get("/episodes/{episode_id}/score")
async def score_episode(
    request: Request, episode_id: str, engine: EngineDep, partial: bool = False
) -> Score:
    """The episode's score; 409 while it is being played unless ``partial=true``."""
    score = await engine.score(episode_id, partial=partial, principal=principal_of(request))
    return Score.model_validate(score)


@router.get("/episodes/{episode_id}")
async def get_episode(request: Request, episode_id: str, engine: EngineDep) -> EpisodeRecord:
    """The full record: messages, step rewards, score, public state, timestamps."""
    return EpisodeRecord.model_validate(await engine.episode(episode_id, principal_of(request)))


@router.delete("/episodes/{episode_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_episode(request: Request, episode_id: str, engine: EngineDep) -> Response:
    """Abort the episode (a finished one stays as it is)."""
    await engine.abort(episode_id, principal_of(request))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
