"""``/v1/episodes`` and ``/v1/step``: create, step, score, read and abort episodes.

Creating and stepping are the hot path (a trainer sends thousands of steps a
second), so those three routes parse their bodies with pydantic directly and
answer the engine's plain dicts with orjson, instead of going through FastAPI's
body parsing and response validation, and ``FastRoutes`` serves them past
FastAPI's router; the OpenAPI schema still documents them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
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
from wander.service.api.deps import EngineDep
from wander.service.api.errors import ERROR_RESPONSES, NOT_JSON
from wander.service.engine import Engine
from wander.service.errors import WanderError

router = APIRouter(prefix="/v1", tags=["episodes"], responses=ERROR_RESPONSES)

Body = TypeVar("Body", bound=BaseModel)
_CREATE = TypeAdapter(CreateEpisodesRequest)
_STEP = TypeAdapter(StepRequest)
_BATCH = TypeAdapter(BatchStepRequest)


SELF_PARSED_BODIES: tuple[type[BaseModel], ...] = (
    CreateEpisodesRequest,
    StepRequest,
    BatchStepRequest,
)


def _documented(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI ``requestBody`` for a route that parses its body itself."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def add_body_schemas(openapi: dict[str, Any]) -> dict[str, Any]:
    """Put the schemas of the self-parsed bodies (and what they use) in ``components``."""
    components = openapi.setdefault("components", {}).setdefault("schemas", {})
    for model in SELF_PARSED_BODIES:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
    return openapi


async def _parse(request: Request, adapter: TypeAdapter[Body]) -> Body:
    """The JSON body, with the errors FastAPI's own parsing gives the other routes."""
    if "json" not in request.headers.get("content-type", ""):
        raise WanderError(NOT_JSON)  # bad_request
    try:
        return adapter.validate_json(await request.body())
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors) from None


def _json(content: Any, status_code: int = status.HTTP_200_OK) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


@router.post(
    "/episodes",
    status_code=status.HTTP_201_CREATED,
    response_model=CreateEpisodesResponse,
    openapi_extra=_documented(CreateEpisodesRequest),
)
async def create_episodes(request: Request) -> Response:
    """Reset: ``n`` episodes of one example, sharing its seed (a GRPO group)."""
    body = await _parse(request, _CREATE)
    episodes = await _engine(request).create(body)
    return _json({"episodes": episodes}, status.HTTP_201_CREATED)


@router.post(
    "/episodes/{episode_id}/step", response_model=StepResult, openapi_extra=_documented(StepRequest)
)
async def step_episode(episode_id: str, request: Request) -> Response:
    """Apply one action. Pass ``turn`` so that a retried request applies at most once."""
    body = await _parse(request, _STEP)
    return _json(await _engine(request).step(episode_id, body.action, body.turn))


@router.post("/step", response_model=BatchStepResponse, openapi_extra=_documented(BatchStepRequest))
async def step_batch(request: Request) -> Response:
    """Apply many steps at once; each result is a ``StepResult`` or ``{episode_id, error}``."""
    body = await _parse(request, _BATCH)
    return _json({"results": await _engine(request).step_many(body.steps)})


@router.get("/episodes/{episode_id}/score")
async def score_episode(episode_id: str, engine: EngineDep, partial: bool = False) -> Score:
    """The episode's score; 409 while it is being played unless ``partial=true``."""
    return Score.model_validate(await engine.score(episode_id, partial=partial))


@router.get("/episodes/{episode_id}")
async def get_episode(episode_id: str, engine: EngineDep) -> EpisodeRecord:
    """The full record: messages, step rewards, score, public state, timestamps."""
    return EpisodeRecord.model_validate(await engine.episode(episode_id))


@router.delete("/episodes/{episode_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_episode(episode_id: str, engine: EngineDep) -> Response:
    """Abort the episode (a finished one stays as it is)."""
    await engine.abort(episode_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def hot_routes() -> list[APIRoute]:
    """The create and step routes, which ``FastRoutes`` serves past FastAPI's router."""
    fast = (create_episodes, step_episode, step_batch)
    return [r for r in router.routes if isinstance(r, APIRoute) and r.endpoint in fast]
