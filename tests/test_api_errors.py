"""Bad input gets the documented status, code and error shape; never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from tests.helpers import create, error_of, step
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import free_port


@pytest.mark.parametrize(
    ("body", "status", "code", "loc"),
    [
        ({}, 422, "validation_error", ["body", "env"]),
        ({"env": "chess"}, 404, "env_not_found", None),
        ({"env": "tictactoe", "n": 0}, 422, "validation_error", ["body", "n"]),
        ({"env": "tictactoe", "n": 257}, 422, "validation_error", ["body", "n"]),
        ({"env": "tictactoe", "n": "two"}, 422, "validation_error", ["body", "n"]),
        ({"env": "tictactoe", "example": -1}, 422, "validation_error", ["body", "example"]),
        ({"env": "tictactoe", "example": 10_000}, 422, "validation_error", ["body", "example"]),
        ({"env": "tictactoe", "split": "test"}, 422, "validation_error", ["body", "split"]),
        ({"env": "tictactoe", "seed": -5}, 422, "validation_error", ["body", "seed"]),
        ({"env": "tictactoe", "seed": 2**63}, 422, "validation_error", ["body", "seed"]),
        ({"env": "tictactoe", "colour": "red"}, 422, "validation_error", ["body", "colour"]),
        ({"env": "tictactoe", "config": []}, 422, "validation_error", ["body", "config"]),
        (
            {"env": "tictactoe", "config": {"max_turns": 0}},
            422,
            "validation_error",
            ["body", "config", "max_turns"],
        ),
        (
            {
                "env": "tictactoe",
                "config": {"min_random_move_prob": 0.9, "max_random_move_prob": 0.1},
            },
            422,
            "validation_error",
            ["body", "config"],
        ),
        (
            {"env": "tictactoe", "config": {"unknown": 1}},
            422,
            "validation_error",
            ["body", "config", "unknown"],
        ),
        ({"env": "tictactoe", "metadata": {"x": "y" * 20_000}}, 413, "payload_too_large", None),
        ({"env": "tictactoe", "run": ""}, 422, "validation_error", ["body", "run"]),
        ([1, 2], 422, "validation_error", ["body"]),
        ({"env": "tictactoe", "n": True}, 422, "validation_error", ["body", "n"]),
        ({"env": "tictactoe", "seed": "7"}, 422, "validation_error", ["body", "seed"]),
        ({"env": "tictactoe", "run": "a\u0000b"}, 422, "validation_error", ["body", "run"]),
    ],
)
async def test_bad_create_requests(
    api: httpx.AsyncClient, body: Any, status: int, code: str, loc: list[Any] | None
) -> None:
    response = await api.post("/v1/episodes", json=body)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code
    if loc is not None:
        assert loc in [detail["loc"] for detail in error["details"]]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"env": "tictactoe", "config": {"seed": 18446744073709551616}}', "config"),
        ('{"env": "tictactoe", "metadata": {"n": 18446744073709551616}}', "metadata"),
        ('{"env": "tictactoe", "metadata": {"x": NaN}}', "metadata"),
        ('{"env": "tictactoe", "metadata": {"x": Infinity}}', "metadata"),
        ('{"env": "tictactoe", "metadata": {"x": 1e400}}', "metadata"),
        ('{"env": "tictactoe", "metadata": {"x\\u0000": 1}}', "metadata"),
        ('{"env": "tictactoe", "metadata": {"x": ["\\u0000"]}}', "metadata"),
    ],
)
async def test_numbers_and_text_the_archive_cannot_hold_are_422(
    api: httpx.AsyncClient, raw: str, field: str
) -> None:
    """Each of these was a 500 (orjson, the canonical JSON encoder or PostgreSQL refused it)."""
    response = await api.post(
        "/v1/episodes", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert ["body", field] in [detail["loc"] for detail in error_of(response)["details"]]


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({}, ["body", "action"]),
        ({"action": 5}, ["body", "action", "text"]),
        (
            {"action": {"role": "user", "content": "hi"}},
            ["body", "action", "message", "role"],
        ),
        ({"action": "x", "turn": -1}, ["body", "turn"]),
        ({"action": "x", "turn": False}, ["body", "turn"]),
        ({"action": "x", "turn": "0"}, ["body", "turn"]),
        ({"action": "x", "turn": 2**63}, ["body", "turn"]),
        ({"action": "x", "turn": 0.5}, ["body", "turn"]),
        ({"action": "a\u0000b"}, ["body", "action", "text"]),
        ({"action": {"content": "a\u0000b"}}, ["body", "action", "message", "content"]),
        ({"action": "x", "turn": "first"}, ["body", "turn"]),
        ({"action": "x", "extra": True}, ["body", "extra"]),
        ({"action": {"content": "x", "tool_calls": [{"id": 1}]}}, None),
    ],
)
async def test_bad_step_requests(api: httpx.AsyncClient, body: Any, loc: list[Any] | None) -> None:
    [episode] = await create(api, example=0)
    response = await api.post(f"/v1/episodes/{episode['id']}/step", json=body)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "validation_error"
    if loc is not None:
        assert loc in [detail["loc"] for detail in error["details"]]
    assert (await api.get(f"/v1/episodes/{episode['id']}")).json()["turn"] == 0


async def test_a_whole_number_spelled_as_a_float_is_that_integer(api: httpx.AsyncClient) -> None:
    """JSON has one kind of number: ``0.0`` is 0, as the OpenAPI document (JSON Schema) says."""
    [first, second] = await create(api, example=3.0, seed=7.0, n=2.0)
    assert (first["example"], first["seed"]) == (3, 7) and second["group"] == first["group"]
    response = await api.post(f"/v1/episodes/{first['id']}/step", json={"action": "x", "turn": 0.0})
    assert response.status_code == 200 and response.json()["turn"] == 1


async def test_malformed_json_and_non_json_bodies_are_400(api: httpx.AsyncClient) -> None:
    broken = await api.post(
        "/v1/episodes", content=b'{"env": ', headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400 and error_of(broken)["code"] == "bad_request"
    for path, body in [("/v1/episodes", b'{"env": "tictactoe"}'), ("/v1/step", b'{"steps": []}')]:
        form = await api.post(path, content=body)
        assert form.status_code == 400
        assert "Content-Type: application/json" in error_of(form)["message"]


async def test_unknown_ids_and_routes_are_404(api: httpx.AsyncClient) -> None:
    for response in [
        await step(api, "ep_nope", "x"),
        await api.get("/v1/episodes/ep_nope"),
        await api.get("/v1/episodes/ep_nope/score"),
        await api.delete("/v1/episodes/ep_nope"),
    ]:
        assert response.status_code == 404
        assert error_of(response)["code"] == "episode_not_found"
    env = await api.get("/v1/environments/chess")
    assert env.status_code == 404 and error_of(env)["code"] == "env_not_found"
    route = await api.get("/v2/whatever")
    assert route.status_code == 404 and error_of(route)["code"] == "not_found"
    method = await api.put("/v1/episodes")
    assert method.status_code == 405 and error_of(method)["code"] == "method_not_allowed"
    # A path of two routes allows the methods of both.
    other = await api.put("/v1/episodes/ep_nope")
    assert other.status_code == 405 and other.headers["allow"] == "DELETE, GET"


async def test_an_oversized_action_is_413_and_changes_nothing(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, example=0)
    response = await step(api, episode["id"], "x" * 65_537, 0)
    assert response.status_code == 413 and error_of(response)["code"] == "payload_too_large"
    assert (await api.get(f"/v1/episodes/{episode['id']}")).json()["turn"] == 0


async def test_an_oversized_batch_is_413(api: httpx.AsyncClient) -> None:
    steps = [{"episode_id": "ep_x", "action": "x"}] * 1025
    response = await api.post("/v1/step", json={"steps": steps})
    assert response.status_code == 413 and error_of(response)["code"] == "payload_too_large"
    malformed = await api.post("/v1/step", json={"steps": [{"action": "x"}]})
    assert malformed.status_code == 422
    assert ["body", "steps", 0, "episode_id"] in [d["loc"] for d in error_of(malformed)["details"]]


async def test_an_unreachable_store_is_503_with_retry_after(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    app = create_app(
        Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0", database_url=sqlite_url)
    )
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://t"
        ) as api,
    ):
        for response in [
            await api.get("/readyz"),
            await api.post("/v1/episodes", json={"env": "tictactoe"}),
            await step(api, "ep_x", "x"),
        ]:
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert error_of(response)["code"] == "store_unavailable"
        assert (await api.get("/healthz")).status_code == 200


async def test_a_crashing_environment_gives_the_error_shape_on_every_route(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug is a 500, but still the documented shape, on a ``JSONBodyRoute`` (the
    step) as on a route with FastAPI's own handler (the score)."""
    service = create_app(settings)
    async with (
        LifespanManager(service) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app, raise_app_exceptions=False),
            base_url="http://wander.test",
        ) as api,
    ):
        [episode] = await create(api, example=0)
        env = service.state.catalog.env("tictactoe")

        def crash(*args: Any) -> Any:
            raise RuntimeError("a bug in the environment")

        monkeypatch.setattr(env, "step", crash)
        # Reads run no environment code (scores are stored): make the engine's read crash.
        monkeypatch.setattr(service.state.engine, "score", crash)
        for response in [
            await step(api, episode["id"], "<move>4</move>", 0),
            await api.get(f"/v1/episodes/{episode['id']}/score", params={"partial": True}),
        ]:
            assert response.status_code == 500
            assert error_of(response)["code"] == "internal_error"
