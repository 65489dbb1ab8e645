"""MCP's ``tools/list`` and ``tools/call`` as JSON-RPC 2.0, for the WS ``mcp`` frame and
``POST /mcp``: what OpenEnv's MCP clients speak to tool environments, and, over
``POST /mcp``, what any MCP client speaks (MCP's streamable HTTP transport, stateless):
its ``initialize`` handshake (the protocol revisions ``HANDSHAKE_VERSIONS``), ``ping``,
and notifications, which get no answer.

``tools/list`` needs no episode; ``tools/call`` is one step of the session's episode
with one tool call, exactly as the ``call_tool`` action. Every failure is a JSON-RPC
error in the answer (OpenEnv's codes), never an HTTP error: a Wander error keeps its
code and details in the error's ``data``.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from wander.service.api.openenv.actions import Reply, parse_action
from wander.service.api.openenv.session import Session, mcp_tools
from wander.service.api.openenv.wire import JsonRpcRequest
from wander.service.errors import InvalidInput, WanderError

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
"""A Wander error (its code in ``data``): the episode is done, unknown, ..."""
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""MCP revisions whose ``initialize`` handshake this endpoint answers (a client that asks
for another is offered the latest: MCP's negotiation). A client of a later, handshake-free
revision asks ``server/discover`` first and, told the method does not exist, falls back
to the handshake, as MCP's own client does."""


async def handle(
    session: Session, body: Any, *, named: bool = False, episode: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``body`` (None for a notification, which has none).
    ``named`` (``POST /mcp``, one request): a ``tools/call`` steps the episode its params
    name (``episode_id``, or OpenEnv's ``session_id``), at their ``turn`` when given, else
    the one ``episode`` names (the endpoint's query: what a client that sends only a
    tool's name and arguments reaches); else the session's episode."""
    try:
        request = JsonRpcRequest.model_validate(body)
    except ValidationError as exc:
        return error(INVALID_REQUEST, f"Invalid request: {_first(exc)}", None)
    if request.method.startswith("notifications/") and "id" not in body:
        return None
    if request.method not in ("tools/list", "tools/call", "initialize", "ping"):
        return error(METHOD_NOT_FOUND, f"Method not found: {request.method}", request.id)
    try:
        if request.method == "initialize":
            result = _initialized(session, request.params)
        elif request.method == "ping":
            result = {}
        elif request.method == "tools/list":
            result = {"tools": mcp_tools(session.env)}
        else:
            params = {**(episode or {}), **request.params}
            if named:
                await _follow(session, params)
            result = await _call_tool(session, params)
    except InvalidInput as exc:
        return error(INVALID_PARAMS, exc.message, request.id, exc.details)
    except WanderError as exc:
        data = {"code": exc.code, "message": exc.message, "details": exc.details}
        return error(SERVER_ERROR, exc.message, request.id, data)
    except Exception:
        log.exception("MCP %s failed", request.method)
        return error(INTERNAL_ERROR, "internal server error", request.id)
    return {"jsonrpc": "2.0", "id": request.id, "result": result}


def _initialized(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """The answer to MCP's ``initialize``: the revision (the client's if it is one of
    ``HANDSHAKE_VERSIONS``, else the latest), tools as the one capability, and who
    answers."""
    asked = params.get("protocolVersion")
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    env = session.env
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": f"wander/{env.name}", "version": env.version},
        "instructions": env.description,
    }


def error(code: int, message: str, request_id: Any, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": code, "message": message, "data": data}}  # fmt: skip


async def _follow(session: Session, params: dict[str, Any]) -> None:
    """Take the episode and turn out of ``params`` and have the session follow them."""
    episode_id, session_id = params.pop("episode_id", None), params.pop("session_id", None)
    if episode_id is None:
        episode_id = session_id
    turn = params.pop("turn", None)
    if episode_id is None:
        return  # the call then says that there is no episode
    whole = isinstance(turn, int) and not isinstance(turn, bool) and turn >= 0
    if not isinstance(episode_id, str) or not (turn is None or whole):
        raise InvalidInput("episode_id must be a string, and turn a whole number", [
            {"loc": ["params"], "msg": "episode_id: string; turn: integer >= 0",
             "type": "value_error"}
        ])  # fmt: skip
    await session.follow(episode_id, turn)


async def _call_tool(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """One step with one tool call; the result in MCP's shape (``content``, ``isError``),
    with ``data`` (the tool's answer, which OpenEnv's MCP client returns), the step's
    ``reward`` and ``done``, and the episode's ``metadata``."""
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput("Missing 'name' in params", [
            {"loc": ["params", "name"], "msg": "Field required", "type": "missing"}
        ])  # fmt: skip
    call = {"type": "call_tool", "tool_name": name, "arguments": params.get("arguments", {})}
    action = parse_action(call, bool(session.env.tools))
    assert isinstance(action, Reply)
    answer = await session.apply(action)
    observation = answer["observation"]
    texts = [m["content"] for m in observation["messages"] if m.get("content")]
    return {
        "content": [{"type": "text", "text": text} for text in texts],
        "isError": False,
        "data": observation["result"],
        "reward": answer["reward"],
        "done": answer["done"],
        "metadata": answer["metadata"],
    }


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(map(str, error['loc'])) or 'body'}: {error['msg']}"
