"""``WS /openenv/{env}/ws``: OpenEnv's WebSocket session, over a stored Wander episode.

The frames are OpenEnv 0.10's: the client sends ``{"type": "reset" | "step" | "state" |
"close" | "mcp", "data": ...}`` and gets ``observation``, ``state``, ``mcp`` or ``error``
frames back, an error being ``{"message", "code"}`` with OpenEnv's codes (INVALID_JSON,
UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR, SESSION_ERROR). A failed frame never
ends the session; only ``close`` (or the client leaving) does, and it ends the
connection alone: the episode stays in the store until its idle expiry, and
``?episode_id=ID`` continues it on any replica.

OpenEnv's own clients build the socket's URL by appending ``/ws`` to the base URL,
query string included: ``http://h/openenv/tictactoe?episode_id=E`` becomes
``ws://h/openenv/tictactoe?episode_id=E/ws``. So the base URL itself also takes a
WebSocket, and a query string ending in ``/ws`` loses that ending: such a client
reattaches by putting ``?episode_id=`` on its base URL.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from wander.service.api.auth import RateLimiter, audit, principal_of
from wander.service.api.openenv import mcp
from wander.service.api.openenv.session import Session
from wander.service.api.openenv.wire import (
    CloseFrame,
    McpFrame,
    ResetFrame,
    StateFrame,
    StepFrame,
    field_errors,
)
from wander.service.engine import Engine
from wander.service.errors import InvalidInput, WanderError

log = logging.getLogger(__name__)

router = APIRouter(prefix="/openenv")

Frame = dict[str, Any]


@router.websocket("/{env:path}/ws")
async def session_socket(websocket: WebSocket, env: str) -> None:
    """One OpenEnv session (``?episode_id=ID[&turn=T]`` continues an episode)."""
    await serve(websocket, env)


@router.websocket("/{env:path}")
async def base_socket(websocket: WebSocket, env: str) -> None:
    """The same session at the base URL, for OpenEnv clients whose base URL holds
    ``?episode_id=``: they connect to ``{base}?episode_id=ID/ws``."""
    await serve(websocket, env)


async def serve(websocket: WebSocket, env: str) -> None:
    await websocket.accept()
    engine: Engine = websocket.app.state.engine
    limiter: RateLimiter = websocket.app.state.limiter
    session: Session | None = None
    refusal: Frame | None = None
    try:
        query = connect_query(websocket.scope["query_string"])
        opened = Session(engine, engine.catalog.env(env), principal_of(websocket))
        audit(websocket, episode_ids=opened.played)  # the session's line, at its close
        session = await _open(opened, query)
    except WanderError as exc:  # answered to every frame: the client reads it on its first call
        refusal = error_frame("SESSION_ERROR", exc.message, error=_envelope(exc))
    try:
        while True:
            raw = await _receive(websocket)
            if session is None:
                if _is_close(raw):
                    break
                reply: Frame | None = refusal
            else:
                reply = await _limited(limiter, session) or await answer(session, raw)
            if reply is None:
                break
            await websocket.send_text(orjson.dumps(reply).decode())
    except WebSocketDisconnect:
        pass
    finally:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close()


def connect_query(raw: bytes) -> dict[str, str]:
    """The connection's query parameters; a query ending in ``/ws`` (an OpenEnv client
    whose base URL held the query) loses that ending."""
    text = raw.decode("latin-1").removesuffix("/ws")
    return dict(parse_qsl(text))


async def answer(session: Session, raw: str | bytes) -> Frame | None:
    """The frame answering ``raw``, or None for ``close``."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return error_frame("INVALID_JSON", f"Invalid JSON: {exc}")
    if not isinstance(message, dict):
        errors = [{"loc": [], "msg": "Input should be an object", "type": "dict_type"}]
        return error_frame("VALIDATION_ERROR", "Invalid message", errors=errors)
    kind = message.get("type", "")
    try:
        match kind:
            case "reset":
                reset = ResetFrame.model_validate(message)
                return {"type": "observation", "data": await session.reset(reset.data)}
            case "step":
                data = message.get("data")
                if not (isinstance(data, dict) and len(message) == 2):  # else: say what is wrong
                    data = StepFrame.model_validate(message).data
                return {"type": "observation", "data": await session.step(data)}
            case "state":
                StateFrame.model_validate(message)
                return {"type": "state", "data": await session.state()}
            case "close":
                CloseFrame.model_validate(message)
                return None
            case "mcp":
                call = McpFrame.model_validate(message)
                return {"type": "mcp", "data": await mcp.handle(session, call.data)}
            case _:
                return error_frame("UNKNOWN_TYPE", f"Unknown message type: {kind}")
    except ValidationError as exc:
        return error_frame("VALIDATION_ERROR", "Invalid message", errors=field_errors(exc))
    except InvalidInput as exc:
        return error_frame("VALIDATION_ERROR", exc.message, errors=exc.details)
    except WanderError as exc:
        return error_frame("EXECUTION_ERROR", exc.message, error=_envelope(exc))
    except Exception:
        log.exception("OpenEnv %s frame failed", kind)
        return error_frame("EXECUTION_ERROR", "internal server error")


def error_frame(code: str, message: str, **extra: Any) -> Frame:
    """OpenEnv's error frame; ``extra`` as OpenEnv adds ``errors``. A Wander error also
    comes whole, as ``error`` (``code``, ``message``, ``details``), so that a client can
    tell a finished episode (``episode_done``) from a retryable outage
    (``store_unavailable``)."""
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


async def _limited(limiter: RateLimiter, session: Session) -> Frame | None:
    """An error frame when the frame is over its key's rate limit: each frame is a
    request, as each HTTP step is."""
    try:
        await limiter.take(session.principal)
    except WanderError as exc:
        return error_frame("EXECUTION_ERROR", exc.message, error=_envelope(exc))
    return None


async def _open(session: Session, query: dict[str, str]) -> Session:
    """The connection's session, attached to ``episode_id`` (``session_id``, OpenEnv's
    name, is taken too) when the query names one."""
    episode_id = query.get("episode_id") or query.get("session_id")
    turn = query.get("turn")
    if turn is not None and not (turn.isascii() and turn.isdigit()):
        raise InvalidInput("turn must be a whole number: the last turn the client saw")
    if episode_id:
        await session.attach(episode_id, None if turn is None else int(turn))
    return session


async def _receive(websocket: WebSocket) -> str | bytes:
    """The next frame's text (binary frames are taken as UTF-8 JSON too)."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text: str | None = message.get("text")
    return text if text is not None else message.get("bytes") or b""


def _is_close(raw: str | bytes) -> bool:
    with contextlib.suppress(orjson.JSONDecodeError):
        return orjson.loads(raw) == {"type": "close"}
    return False


def _envelope(exc: WanderError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "details": exc.details}
