"""The OpenEnv surface, ``/openenv/{env}``: its HTTP routes (through ASGI, on both stores)
and its WebSocket sessions (against a real ``wander serve``, with ``websockets``).

What OpenEnv's real clients do with it is in tests/test_openenv_interop.py; here are the
exact shapes, the error codes, reattaching and the exactly-once resend."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.agents import answer
from tests.helpers import IN_THE_SHARED_LOOP, error_of
from wander.service.archive.migrations import upgrade
from wander.testing import ServiceProcess

SHARED_SERVICE = True
pytestmark = IN_THE_SHARED_LOOP

TICTACTOE = "/openenv/tictactoe"
CONFIG = {"min_random_move_prob": 0.5, "max_random_move_prob": 0.5}


async def record(api: httpx.AsyncClient, episode_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/episodes/{episode_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# HTTP


async def test_an_environment_named_with_a_slash_has_its_routes(api: httpx.AsyncClient) -> None:
    base = "/openenv/rg/chain_sum"
    assert (await api.get(f"{base}/health")).json() == {"status": "healthy"}
    metadata = (await api.get(f"{base}/metadata")).json()
    assert (metadata["name"], metadata["version"]) == ("rg/chain_sum", "1.0.0")
    assert isinstance(metadata["description"], str) and metadata["description"]
    schema = (await api.get(f"{base}/schema")).json()
    assert set(schema) == {"action", "observation", "state", "reset_observation"}
    action = schema["action"]
    assert (action["title"], action["required"], list(action["properties"])) == (
        "WanderAction", ["content"], ["content"]
    )  # fmt: skip
    assert action["properties"]["content"]["type"] == "string"
    assert {"prompt", "messages", "info", "metadata"} <= set(schema["observation"]["properties"])
    assert schema["reset_observation"] == schema["observation"]
    assert {"episode_id", "step_count"} <= set(schema["state"]["properties"])
    opened = await api.post(f"{base}/reset", json={"example": 3})
    assert opened.status_code == 200, opened.text
    assert (
        opened.json()["observation"]["info"]
        == (await record(api, opened.json()["metadata"]["episode_id"]))["state"]
    )


async def test_a_tool_environment_publishes_tool_calls_and_its_tools(
    api: httpx.AsyncClient,
) -> None:
    action = (await api.get("/openenv/sql/schema")).json()["action"]
    assert (action["required"], set(action["properties"])) == (
        ["content"],
        {"content", "tool_calls"},
    )
    listed = await api.post(
        "/openenv/sql/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1}
    )
    assert listed.status_code == 200
    tools = listed.json()["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["list_tables", "describe_table", "run_sql"]
    assert tools[2]["inputSchema"]["required"] == ["query"]


async def test_reset_step_and_state_play_a_stored_episode(api: httpx.AsyncClient) -> None:
    reset = {"seed": 7, "example": 2, "config": CONFIG, "run": "oe", "metadata": {"k": 1},
             "episode_id": "my-label"}  # fmt: skip
    opened = (await api.post(f"{TICTACTOE}/reset", json=reset)).json()
    episode_id = opened["metadata"]["episode_id"]
    assert opened["metadata"] == {"episode_id": episode_id, "turn": 0}
    stored = await record(api, episode_id)
    assert (stored["seed"], stored["example"], stored["run"]) == (7, 2, "oe")
    assert stored["metadata"] == {"k": 1, "openenv_episode_id": "my-label"}
    system, user = stored["messages"]
    assert opened == {
        "observation": {"prompt": f"{system['content']}\n\n{user['content']}",
                        "messages": [system, user], "info": stored["state"],
                        "metadata": opened["metadata"]},
        "reward": None,
        "done": False,
        "metadata": opened["metadata"],
    }  # fmt: skip

    body = {"action": {"content": answer(4)}, "episode_id": episode_id, "turn": 0}
    stepped = await api.post(f"{TICTACTOE}/step", json=body)
    again = await api.post(f"{TICTACTOE}/step", json=body)  # a retry: applied once
    assert stepped.status_code == again.status_code == 200, stepped.text
    assert again.json() == stepped.json()
    stored = await record(api, episode_id)
    assert stored["turn"] == 1
    [reply] = stored["messages"][3:]
    assert stepped.json() == {
        "observation": {"prompt": reply["content"], "messages": [reply], "info": stored["state"],
                        "metadata": {"episode_id": episode_id, "turn": 1}},
        "reward": stored["step_rewards"][0],
        "done": False,
        "metadata": {"episode_id": episode_id, "turn": 1},
    }  # fmt: skip
    other = {**body, "action": {"content": answer(0)}}
    refused = await api.post(f"{TICTACTOE}/step", json=other)
    assert (refused.status_code, error_of(refused)["code"]) == (409, "turn_mismatch")

    state = (await api.get(f"{TICTACTOE}/state", params={"episode_id": episode_id})).json()
    assert state == {
        "episode_id": episode_id, "step_count": 1, "env": "tictactoe", "split": "train",
        "example": 2, "seed": 7, "group": stored["group"], "run": "oe", "status": "active",
        "done": False, "total": stored["score"]["total"], "info": stored["state"],
    }  # fmt: skip

    reattached = (await api.post(f"{TICTACTOE}/reset", json={"episode_id": episode_id})).json()
    assert reattached["observation"]["messages"] == stored["messages"]
    assert reattached["observation"]["prompt"] == reply["content"]
    assert (reattached["reward"], reattached["metadata"]["turn"]) == (None, 1)


async def test_a_reset_without_a_body_starts_a_random_example(api: httpx.AsyncClient) -> None:
    opened = await api.post(f"{TICTACTOE}/reset")
    assert opened.status_code == 200, opened.text
    assert (await record(api, opened.json()["metadata"]["episode_id"]))["turn"] == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code", "loc"),
    [
        ("post", "/step", {"action": {"content": "<move>4</move>"}}, 422, "validation_error",
         ["body", "episode_id"]),
        ("post", "/step", {"action": {"content": "x"}, "episode_id": "ep_gone"}, 404,
         "episode_not_found", None),
        ("post", "/step", {"action": {"content": "x", "foo": 1}, "episode_id": "ep_gone"}, 422,
         "validation_error", ["body", "action", "foo"]),
        ("post", "/step", {"action": {"content": "x\u0000"}, "episode_id": "ep_gone"}, 422,
         "validation_error", ["body", "action", "content"]),
        ("post", "/step", {"action": {"type": "call_tool", "tool_name": "run_sql"},
                           "episode_id": "ep_gone"}, 422, "validation_error",
         ["body", "action", "type"]),
        ("post", "/step", {"action": {"content": "\ud800"}, "episode_id": "ep_gone"}, 400,
         "bad_request", None),  # a lone surrogate: not JSON the store can keep
        ("post", "/reset", {"run": "\ud800"}, 400, "bad_request", None),
        ("post", "/reset", {"seed": -1}, 422, "validation_error", ["body", "seed"]),
        ("post", "/reset", {"n": 2}, 422, "validation_error", ["body", "n"]),
        ("post", "/reset", {"example": 10**6}, 422, "validation_error", ["body", "example"]),
        ("post", "/reset", {"episode_id": "ep_expired"}, 404, "episode_not_found", None),
        ("get", "/state", None, 422, "validation_error", ["query", "episode_id"]),
        ("get", "/state?episode_id=ep_gone", None, 404, "episode_not_found", None),
    ],
)  # fmt: skip
async def test_http_errors_keep_the_service_envelope(
    api: httpx.AsyncClient,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
    loc: list[str] | None,
) -> None:
    content = None if body is None else json.dumps(body)  # ASCII: lone surrogates escaped
    headers = {"content-type": "application/json"}
    response = await api.request(
        method.upper(), f"{TICTACTOE}{path}", content=content, headers=headers
    )
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code
    if loc is not None:
        assert [detail["loc"] for detail in error["details"]] == [loc]


async def test_an_episode_answers_under_its_own_environment_only(api: httpx.AsyncClient) -> None:
    opened = (await api.post("/openenv/sql/reset", json={"example": 0})).json()
    episode_id = opened["metadata"]["episode_id"]
    state = await api.get(f"{TICTACTOE}/state", params={"episode_id": episode_id})
    assert (state.status_code, error_of(state)["code"]) == (400, "bad_request")
    assert "/openenv/sql" in error_of(state)["message"]
    reattach = await api.post(f"{TICTACTOE}/reset", json={"episode_id": episode_id})
    assert reattach.status_code == 400
    body = {"action": {"content": answer(4)}, "episode_id": episode_id}
    stepped = await api.post(f"{TICTACTOE}/step", json=body)
    assert (stepped.status_code, error_of(stepped)["code"]) == (400, "bad_request")
    assert (await record(api, episode_id))["turn"] == 0
    both = await api.post("/openenv/sql/reset", json={"episode_id": episode_id, "seed": 1})
    assert (both.status_code, error_of(both)["details"][0]["loc"]) == (422, ["body", "seed"])
    unknown = await api.get("/openenv/nope/health")
    assert (unknown.status_code, error_of(unknown)["code"]) == (404, "env_not_found")


async def test_mcp_tools_call_steps_the_named_episode(api: httpx.AsyncClient) -> None:
    opened = (await api.post("/openenv/sql/reset", json={"example": 0})).json()
    episode_id = opened["metadata"]["episode_id"]
    call = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
            "params": {"name": "list_tables", "arguments": {}, "episode_id": episode_id,
                       "turn": 0}}  # fmt: skip
    answered = (await api.post("/openenv/sql/mcp", json=call)).json()
    again = (await api.post("/openenv/sql/mcp", json=call)).json()  # a retry: applied once
    stored = await record(api, episode_id)
    assert stored["turn"] == 1
    tables = stored["messages"][-1]["content"]
    assert "customers" in tables
    assert answered == again == {
        "jsonrpc": "2.0", "id": "c1",
        "result": {"content": [{"type": "text", "text": tables}], "isError": False,
                   "data": tables, "reward": stored["step_rewards"][0], "done": False,
                   "metadata": {"episode_id": episode_id, "turn": 1}},
    }  # fmt: skip


async def test_mcp_speaks_the_handshake_of_any_mcp_client(api: httpx.AsyncClient) -> None:
    """MCP's ``initialize`` (the client's revision where it is one this endpoint knows,
    else its latest), ``ping``, notifications (202, no body), no ``server/discover`` (a
    client of a later revision falls back to the handshake), no server stream."""

    async def rpc(method: str, **params: object) -> dict[str, object]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = await api.post("/openenv/sql/mcp", json=body)
        assert answer.status_code == 200
        parsed: dict[str, object] = answer.json()
        return parsed

    hello = await rpc("initialize", protocolVersion="2025-06-18", capabilities={},
                      clientInfo={"name": "test", "version": "1"})  # fmt: skip
    assert hello["result"] == {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "wander/sql", "version": "1.1.0"},
        "instructions": (await api.get("/v1/environments/sql")).json()["description"],
    }  # fmt: skip
    later = await rpc("initialize", protocolVersion="2099-01-01")
    assert later["result"]["protocolVersion"] == "2025-11-25"  # type: ignore[index]
    assert (await rpc("ping"))["result"] == {}
    assert (await rpc("server/discover"))["error"]["code"] == -32601  # type: ignore[index]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    accepted = await api.post("/openenv/sql/mcp", json=note)
    assert (accepted.status_code, accepted.content) == (202, b"")
    assert (await api.get("/openenv/sql/mcp")).status_code == 405


async def test_mcp_tools_call_steps_the_episode_its_url_names(api: httpx.AsyncClient) -> None:
    """A client that sends only a tool's name and arguments (any MCP client) reaches the
    episode named in the endpoint's query, at the query's turn when given."""
    opened = (await api.post("/openenv/sql/reset", json={"example": 0})).json()
    episode_id = opened["metadata"]["episode_id"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_tables", "arguments": {}}}  # fmt: skip
    url = f"/openenv/sql/mcp?episode_id={episode_id}&turn=0"
    first, retried = [(await api.post(url, json=call)).json() for _ in range(2)]
    assert first == retried and first["result"]["metadata"]["turn"] == 1  # applied once
    assert (await record(api, episode_id))["turn"] == 1
    stale = (await api.post(url, json={**call, "id": 2})).json()  # still turn 0: a retry
    assert stale["result"] == first["result"]
    onward = (await api.post(f"/openenv/sql/mcp?episode_id={episode_id}", json=call)).json()
    assert onward["result"]["metadata"]["turn"] == 2


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"{}", -32600),
        (b'{"jsonrpc": "2.0", "method": "tools/nope", "id": 3}', -32601),
        (b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {}}, "id": 3}',
         -32602),
        (b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "list_tables"}, "id": 3}',
         -32000),
        (b'{"jsonrpc": "2.0", "method": "tools/call", "id": 3,'
         b' "params": {"name": "list_tables", "episode_id": "ep_x", "turn": -1}}', -32602),
        (b'{"jsonrpc": "2.0", "method": "tools/call", "id": 3,'
         b' "params": {"name": "list_tables", "episode_id": "ep_x"}}', -32000),
    ],
)  # fmt: skip
async def test_mcp_errors_are_json_rpc_errors(
    api: httpx.AsyncClient, body: bytes, code: int
) -> None:
    response = await api.post(
        "/openenv/sql/mcp", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json()["error"]["code"] == code


async def test_the_openapi_document_of_a_base_url_lists_its_routes(
    api: httpx.AsyncClient,
) -> None:
    document = (await api.get("/openenv/rg/chain_sum/openapi.json")).json()
    assert document["servers"] == [{"url": "/openenv/rg/chain_sum"}]
    assert set(document["paths"]) == {
        "/health", "/metadata", "/schema", "/reset", "/step", "/state"
    }  # fmt: skip
    parameters = document["paths"]["/state"]["get"]["parameters"]
    assert [(p["name"], p["in"]) for p in parameters] == [("episode_id", "query")]


# WebSocket


@asynccontextmanager
async def socket(live: ServiceProcess, path: str) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(f"ws://127.0.0.1:{live.port}{path}") as connection:
        yield connection


async def call(connection: ClientConnection, frame: dict[str, Any] | str) -> dict[str, Any]:
    await connection.send(frame if isinstance(frame, str) else json.dumps(frame))
    reply: dict[str, Any] = json.loads(await connection.recv())
    return reply


def rest(live: ServiceProcess, episode_id: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{live.url}/v1/episodes/{episode_id}").json()
    return body


async def test_ws_errors_have_openenv_codes_and_keep_the_session(live: ServiceProcess) -> None:
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        early = await call(ws, {"type": "step", "data": {"content": answer(4)}})
        assert early["type"] == "error"
        assert early["data"]["code"] == "EXECUTION_ERROR"
        assert "send a reset first" in early["data"]["message"]
        assert (await call(ws, {"type": "state"}))["data"]["code"] == "EXECUTION_ERROR"

        bad = await call(ws, "{not json")
        assert bad["data"]["code"] == "INVALID_JSON"
        assert bad["data"]["message"].startswith("Invalid JSON: ")
        assert (await call(ws, {"type": "bogus"}))["data"] == {
            "message": "Unknown message type: bogus", "code": "UNKNOWN_TYPE"
        }  # fmt: skip
        for frame, loc in [
            ({"type": "step"}, ["data"]),
            ({"type": "state", "data": {}}, ["data"]),
            ({"type": "reset", "data": {"seed": -1}}, ["seed"]),
            ({"type": "reset", "data": {"n": 4}}, ["n"]),
            ("[1, 2]", []),
        ]:
            refused = await call(ws, frame)
            assert refused["data"]["code"] == "VALIDATION_ERROR", frame
            assert [error["loc"] for error in refused["data"]["errors"]] == [loc]

        opened = await call(ws, {"type": "reset", "data": {"example": 0, "seed": 5}})
        assert opened["type"] == "observation"
        episode_id = opened["data"]["metadata"]["episode_id"]
        extra = await call(ws, {"type": "step", "data": {"content": "x", "move": 4}})
        assert extra["data"]["code"] == "VALIDATION_ERROR"
        assert extra["data"]["errors"][0]["loc"] == ["move"]
        moved = await call(ws, {"type": "step", "data": {"content": answer(4)}})
        assert moved["type"] == "observation" and moved["data"]["metadata"]["turn"] == 1
    assert rest(live, episode_id)["turn"] == 1


async def test_ws_step_on_a_finished_episode_says_why(live: ServiceProcess) -> None:
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        await call(ws, {"type": "reset", "data": {"config": {"max_turns": 1}}})
        last = await call(ws, {"type": "step", "data": {"content": "no move"}})
        assert last["data"]["done"] is True
        after = await call(ws, {"type": "step", "data": {"content": answer(4)}})
        assert after["data"]["code"] == "EXECUTION_ERROR"
        assert after["data"]["error"]["code"] == "episode_done"
        state = await call(ws, {"type": "state"})
        assert (state["type"], state["data"]["done"], state["data"]["status"]) == (
            "state", True, "done"
        )  # fmt: skip


async def test_close_only_detaches_and_any_url_form_reattaches(live: ServiceProcess) -> None:
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        opened = await call(ws, {"type": "reset", "data": {"example": 3, "config": CONFIG}})
        episode_id = opened["data"]["metadata"]["episode_id"]
        await call(ws, {"type": "step", "data": {"content": answer(4)}})
        await ws.send(json.dumps({"type": "close"}))
        with pytest.raises(websockets.ConnectionClosedOK):
            await ws.recv()  # no answer: the server closes the connection

    forms = [
        f"{TICTACTOE}/ws?episode_id={episode_id}",
        f"{TICTACTOE}/ws?session_id={episode_id}",  # OpenEnv's name for it
        f"{TICTACTOE}?episode_id={episode_id}/ws",  # what OpenEnv's clients make of ?episode_id=
    ]
    for path in forms:
        async with socket(live, path) as ws:
            state = await call(ws, {"type": "state"})
            assert (state["data"]["episode_id"], state["data"]["step_count"]) == (episode_id, 1)
    async with socket(live, forms[-1]) as ws:
        moved = await call(ws, {"type": "step", "data": {"content": answer(0)}})
        assert moved["data"]["metadata"] == {"episode_id": episode_id, "turn": 2}

    async with socket(live, f"{TICTACTOE}/ws") as ws:  # a reset naming it reattaches too
        reattached = await call(ws, {"type": "reset", "data": {"episode_id": episode_id}})
        stored = rest(live, episode_id)
        assert reattached["data"]["observation"]["messages"] == stored["messages"]
        assert reattached["data"]["metadata"]["turn"] == stored["turn"]
        assert reattached["data"]["done"] is stored["done"]


async def test_frames_are_compressed_only_when_the_setting_says(
    live: ServiceProcess, tmp_path: Path
) -> None:
    """websockets offers permessage-deflate; the service declines it unless
    WANDER_WS_COMPRESSION is on (deflating every frame cost a fifth of a step's CPU)."""
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        assert ws.protocol.extensions == []
        assert (await call(ws, {"type": "reset", "data": {}}))["type"] == "observation"
    database = f"sqlite:///{tmp_path}/archive.db"
    upgrade(database)
    compressing = ServiceProcess(
        {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": "", "WANDER_WS_COMPRESSION": "true"}
    ).start()
    try:
        async with socket(compressing, f"{TICTACTOE}/ws") as ws:
            assert [e.name for e in ws.protocol.extensions] == ["permessage-deflate"]
            assert (await call(ws, {"type": "reset", "data": {}}))["type"] == "observation"
    finally:
        compressing.stop()


async def test_a_resent_step_is_applied_once(live: ServiceProcess) -> None:
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        opened = await call(ws, {"type": "reset", "data": {"example": 4, "config": CONFIG}})
        episode_id = opened["data"]["metadata"]["episode_id"]
        first = await call(ws, {"type": "step", "data": {"content": answer(4)}})
    # The client lost the answer with its connection: it resends from the turn it saw.
    async with socket(live, f"{TICTACTOE}/ws?episode_id={episode_id}&turn=0") as ws:
        resent = await call(ws, {"type": "step", "data": {"content": answer(4)}})
        assert resent == first
        assert rest(live, episode_id)["turn"] == 1
        moved = await call(ws, {"type": "step", "data": {"content": answer(0)}})
        assert moved["data"]["metadata"]["turn"] == 2
    async with socket(live, f"{TICTACTOE}/ws?episode_id={episode_id}&turn=0") as ws:
        stale = await call(ws, {"type": "step", "data": {"content": answer(8)}})
        assert stale["data"]["error"]["code"] == "turn_mismatch"
    assert rest(live, episode_id)["turn"] == 2


async def test_two_sessions_on_one_episode_never_both_apply_a_turn(live: ServiceProcess) -> None:
    async with socket(live, f"{TICTACTOE}/ws") as first:
        opened = await call(first, {"type": "reset", "data": {"example": 6}})
        episode_id = opened["data"]["metadata"]["episode_id"]
        async with socket(live, f"{TICTACTOE}/ws?episode_id={episode_id}") as second:
            moved = await call(first, {"type": "step", "data": {"content": answer(4)}})
            assert moved["type"] == "observation"
            overtaken = await call(second, {"type": "step", "data": {"content": answer(0)}})
            assert overtaken["data"]["code"] == "EXECUTION_ERROR"
            assert overtaken["data"]["error"] == {
                "code": "turn_mismatch",
                "message": "the step is for turn 0, but the episode is at turn 1",
                "details": {"turn": 1},
            }
    assert rest(live, episode_id)["turn"] == 1


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/openenv/nope/ws", "no environment named 'nope'"),
        (f"{TICTACTOE}/ws?episode_id=ep_gone", "no episode 'ep_gone'"),
        (f"{TICTACTOE}/ws?episode_id=ep_gone&turn=x", "turn must be a whole number"),
    ],
)
async def test_a_session_that_cannot_open_answers_every_frame_with_why(
    live: ServiceProcess, path: str, why: str
) -> None:
    async with socket(live, path) as ws:
        for frame in ({"type": "reset"}, {"type": "state"}):
            refused = await call(ws, frame)
            assert refused["data"]["code"] == "SESSION_ERROR"
            assert why in refused["data"]["message"]
        await ws.send(json.dumps({"type": "close"}))
        with pytest.raises(websockets.ConnectionClosedOK):
            await ws.recv()


async def test_a_session_refuses_an_episode_of_another_environment(live: ServiceProcess) -> None:
    async with socket(live, "/openenv/sql/ws") as ws:
        opened = await call(ws, {"type": "reset", "data": {"example": 0}})
    episode_id = opened["data"]["metadata"]["episode_id"]
    async with socket(live, f"{TICTACTOE}/ws?episode_id={episode_id}") as ws:
        refused = await call(ws, {"type": "state"})
        assert refused["data"]["code"] == "SESSION_ERROR"
        assert "/openenv/sql" in refused["data"]["message"]


async def test_tool_actions_and_mcp_frames_step_a_tool_environment(live: ServiceProcess) -> None:
    async with socket(live, "/openenv/sql/ws") as ws:
        listed = await call(ws, {"type": "step", "data": {"type": "list_tools"}})  # before reset
        names = [tool["name"] for tool in listed["data"]["observation"]["tools"]]
        assert names == ["list_tables", "describe_table", "run_sql"]
        assert listed["data"]["reward"] is None
        opened = await call(ws, {"type": "reset", "data": {"example": 2}})
        episode_id = opened["data"]["metadata"]["episode_id"]

        tables = await call(
            ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "list_tables"}}
        )
        observation = tables["data"]["observation"]
        assert (observation["tool_name"], tables["data"]["metadata"]["turn"]) == ("list_tables", 1)
        assert "customers" in observation["result"]
        query = {"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM products"}}
        counted = await call(
            ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                         "params": query}}
        )  # fmt: skip
        assert counted["type"] == "mcp"
        assert counted["data"]["result"]["metadata"] == {"episode_id": episode_id, "turn": 2}
        as_string = {"type": "call_tool", "tool_name": "describe_table",
                     "arguments": json.dumps({"table": "orders"})}  # fmt: skip
        described = await call(ws, {"type": "step", "data": as_string})
        assert "CREATE TABLE" in described["data"]["observation"]["result"]
        openai_call = {"content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "list_tables", "arguments": "{}"}}]}  # fmt: skip
        assert (await call(ws, {"type": "step", "data": openai_call}))["type"] == "observation"
        final = await call(ws, {"type": "step", "data": {"content": 42}})
        assert final["data"]["done"] is True

    stored = rest(live, episode_id)
    calls = [m["tool_calls"][0]["function"] for m in stored["messages"] if m.get("tool_calls")]
    assert calls == [
        {"name": "list_tables", "arguments": "{}"},
        {"name": "run_sql", "arguments": '{"query": "SELECT COUNT(*) FROM products"}'},
        {"name": "describe_table", "arguments": '{"table": "orders"}'},
        {"name": "list_tables", "arguments": "{}"},
    ]
    assert stored["messages"][-1] == {"role": "assistant", "content": "42"}
    assert sum(stored["step_rewards"]) == pytest.approx(stored["score"]["total"])


@pytest.mark.parametrize(
    ("data", "content"),
    [
        ({"content": 4}, "4"),
        ({"content": 1.5}, "1.5"),
        ({"content": True}, "true"),
        ({"content": [1, 2]}, "[1, 2]"),
        ({"move": "<move>4</move>"}, '{"move": "<move>4</move>"}'),
    ],
)
async def test_a_reply_that_is_not_text_reaches_the_environment_as_its_json_text(
    live: ServiceProcess, data: dict[str, Any], content: str
) -> None:
    """What Verifiers' OpenEnvTaskset sends when the model's reply looks like JSON."""
    async with socket(live, f"{TICTACTOE}/ws") as ws:
        opened = await call(ws, {"type": "reset", "data": {"example": 1}})
        stepped = await call(ws, {"type": "step", "data": data})
        assert stepped["type"] == "observation"
    messages = rest(live, opened["data"]["metadata"]["episode_id"])["messages"]
    assert messages[2] == {"role": "assistant", "content": content}
