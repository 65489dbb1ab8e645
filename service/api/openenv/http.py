"""OpenEnv's HTTP routes under ``/openenv/{env}``: health, metadata, schema, reset, step,
state, MCP, and an OpenAPI document of their own.

OpenEnv's own ``/reset`` and ``/step`` are stateless (a fresh environment per call),
which means nothing for episodes kept in a store. Here ``/reset`` creates a Wander
episode (or reattaches to one) and says its id in ``metadata.episode_id``; ``/step``
and ``/state`` take that id and act on the stored episode, so the HTTP routes are
stateful when the client asks. Errors keep the service's envelope
(``{"error": {"code", "message", "details"}}``), as on every other route; only
``/mcp`` answers JSON-RPC errors with a 200, as OpenEnv's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, Response, status
from pydantic import TypeAdapter

from wander.service.api.auth import audit, principal_of
from wander.service.api.deps import engine_of
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.api.openenv import mcp
from wander.service.api.openenv.actions import parse_action
from wander.service.api.openenv.session import Session
from wander.service.api.openenv.wire import (
    EnvironmentMetadata,
    HealthAnswer,
    OpenEnvAnswer,
    OpenEnvResetRequest,
    OpenEnvStepRequest,
    SchemaAnswer,
    WanderState,
    schemas,
)
from wander.service.api.routing import JSONBodyRoute, parse_json_body
from wander.service.envs.sdk import Environment
from wander.service.errors import InvalidInput

PREFIX = "/openenv"
router = APIRouter(
    prefix=PREFIX, tags=["openenv"], responses=ERROR_RESPONSES, route_class=JSONBodyRoute
)
RESET_BODY: TypeAdapter[Any] = TypeAdapter(OpenEnvResetRequest)

EpisodeQuery = Annotated[
    str, Query(max_length=200, description="The episode (`metadata.episode_id` of the reset).")
]


def _json(content: Any) -> Response:
    return Response(orjson.dumps(content), status.HTTP_200_OK, media_type="application/json")


def _env(request: Request, env: str) -> Environment[Any]:
    return engine_of(request).catalog.env(env)


def _session(request: Request, env: Environment[Any]) -> Session:
    """The request's session; its audit line names the episodes the session plays."""
    session = Session(engine_of(request), env, principal_of(request))
    audit(request, episode_ids=session.played)
    return session


@router.get("/{env:path}/health")
async def health(request: Request, env: str) -> HealthAnswer:
    """OpenEnv's health check: the environment is served here."""
    _env(request, env)
    return HealthAnswer()


@router.get("/{env:path}/metadata")
async def metadata(request: Request, env: str) -> EnvironmentMetadata:
    """OpenEnv's EnvironmentMetadata of the environment."""
    environment = _env(request, env)
    return EnvironmentMetadata(
        name=environment.name, description=environment.description, version=environment.version
    )


@router.get("/{env:path}/schema")
async def schema(request: Request, env: str) -> SchemaAnswer:
    """JSON schemas of the action (one required field, `content`), the observation and
    the state."""
    return _schemas(bool(_env(request, env).tools))


@router.post(
    "/{env:path}/reset",
    response_model=OpenEnvAnswer,
    openapi_extra={"requestBody": {"required": False, "content": {
        "application/json": {"schema": OpenEnvResetRequest.model_json_schema()}
    }}},
)  # fmt: skip
async def reset(request: Request, env: str) -> Response:
    """A new episode (`seed`, `example`, `split`, `config`, `run`, `metadata`), or the
    current observation of a live one (`episode_id`). The body may be left out, as
    OpenEnv allows: a random example."""
    session = _session(request, _env(request, env))
    data = {}
    if (await request.body()).strip():
        body = await parse_json_body(request, RESET_BODY)
        data = body.model_dump(exclude_unset=True)
    with _located("body"):
        return _json(await session.reset(data))


@router.post("/{env:path}/step", response_model=OpenEnvAnswer)
async def step(request: Request, env: str, body: OpenEnvStepRequest) -> Response:
    """One action on the stored episode `episode_id`; pass `turn` to make a retry safe."""
    environment = _env(request, env)
    with _located("body", "action"):
        action = parse_action(body.action, bool(environment.tools))
    session = _session(request, environment)
    await session.follow(body.episode_id, body.turn)
    return _json(await session.act(action))


@router.get("/{env:path}/state", response_model=WanderState)
async def state(request: Request, env: str, episode_id: EpisodeQuery) -> Response:
    """OpenEnv's state (`episode_id`, `step_count`) of the episode, and its identity."""
    return _json(await _session(request, _env(request, env)).state(episode_id))


@router.post("/{env:path}/mcp", include_in_schema=False)
async def mcp_call(
    request: Request, env: str, episode_id: Annotated[str | None, Query(max_length=200)] = None,
    turn: Annotated[int | None, Query(ge=0)] = None,
) -> Response:  # fmt: skip
    """JSON-RPC 2.0 (MCP's handshake, `tools/list`, `tools/call`); `tools/call` steps the
    episode named by `params.episode_id` (or `session_id`), else by the query's, at the
    `turn` given with it. A notification is accepted with 202 and no body, as MCP's
    streamable HTTP transport has it."""
    environment = _env(request, env)
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _json(mcp.error(mcp.PARSE_ERROR, "Parse error", None))
    named = {"episode_id": episode_id, "turn": turn} if episode_id is not None else None
    answer = await mcp.handle(_session(request, environment), body, named=True, episode=named)
    return Response(status_code=status.HTTP_202_ACCEPTED) if answer is None else _json(answer)


@router.get("/{env:path}/mcp", include_in_schema=False)
async def mcp_stream(request: Request, env: str) -> Response:
    """No stream of server messages (MCP's optional GET): this endpoint sends none."""
    _env(request, env)
    return Response(status_code=status.HTTP_405_METHOD_NOT_ALLOWED, headers={"Allow": "POST"})


@router.get("/{env:path}/openapi.json", include_in_schema=False)
async def openapi(request: Request, env: str) -> dict[str, Any]:
    """The OpenAPI document of this environment's OpenEnv routes, relative to its base
    URL: what OpenEnv's tools read (``openenv validate --url``)."""
    _env(request, env)
    document: dict[str, Any] = request.app.openapi()
    base = f"{PREFIX}/{{env}}"
    paths = {
        path.removeprefix(base): {method: _without_env(op) for method, op in item.items()}
        for path, item in document["paths"].items()
        if path.startswith(f"{base}/")
    }
    info = {**document["info"], "title": f"Wander: {env} (OpenEnv)"}
    return {**document, "info": info, "servers": [{"url": f"{PREFIX}/{env}"}], "paths": paths}


def _without_env(operation: dict[str, Any]) -> dict[str, Any]:
    parameters = operation.get("parameters", [])
    kept = [p for p in parameters if (p["name"], p["in"]) != ("env", "path")]
    return {**operation, "parameters": kept}


@cache
def _schemas(tool_env: bool) -> SchemaAnswer:
    return schemas(tool_env)


@contextmanager
def _located(*prefix: str) -> Iterator[None]:
    """Re-raise an ``InvalidInput`` with its field errors located under ``prefix``: the
    session locates them inside the reset data or the action."""
    try:
        yield
    except InvalidInput as exc:
        if isinstance(exc.details, list):
            exc.details = [
                error
                if error["loc"][:1] == ["body"]
                else {**error, "loc": [*prefix, *error["loc"]]}
                for error in exc.details
            ]
        raise
