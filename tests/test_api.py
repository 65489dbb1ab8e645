"""The v1 HTTP API (docs/api.md) over FastAPI's ASGI transport, on both stores."""

from __future__ import annotations

import math

import httpx

from tests.agents import answer, perfect_agent, random_agent
from tests.helpers import create, error_of, play_game, step

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


async def test_environments_are_listed_with_schema_and_rewards(api: httpx.AsyncClient) -> None:
    listing = (await api.get("/v1/environments")).json()["environments"]
    assert "tictactoe" in [env["name"] for env in listing]
    info = (await api.get("/v1/environments/tictactoe")).json()
    assert info["kind"] == "multi_turn"
    assert info["reward_components"] == [
        {"name": "win", "weight": 1.0},
        {"name": "format", "weight": 0.2},
        {"name": "invalid_move", "weight": 1.0},
    ]
    assert info["splits"] == {"train": 10_000, "eval": 1_000}
    assert info["default_config"]["max_turns"] == 8
    assert "num_groups" in info["config_schema"]["properties"]
    assert info["tools"] is None
    isolation = {env["name"]: env["isolation"] for env in listing}
    assert isolation["tictactoe"] == "inline"  # pure and linear: on the event loop
    # Every scorer of model text runs confined: the eval-based rg scorers among them.
    assert isolation["reverse_text"] == isolation["sql"] == isolation["rg/spiral_matrix"]
    assert isolation["rg/spiral_matrix"] == "process"


async def test_create_makes_a_group_sharing_example_and_seed(api: httpx.AsyncClient) -> None:
    episodes = await create(api, n=4, example=17, run="r1", metadata={"who": "test"})
    assert len(episodes) == 4
    assert len({ep["id"] for ep in episodes}) == 4
    assert all(len(ep["id"]) >= 20 for ep in episodes)  # 128 random bits
    assert {ep["group"] for ep in episodes} == {episodes[0]["group"]}
    assert {(ep["example"], ep["seed"], ep["run"]) for ep in episodes} == {
        (17, episodes[0]["seed"], "r1")
    }
    first = episodes[0]
    assert first["turn"] == 0 and first["done"] is False and first["split"] == "train"
    assert [m["role"] for m in first["observation"]] == ["system", "user"]
    assert first["observation"][1]["content"].endswith("Your turn.")
    assert set(first["info"]) >= {"model_starts", "random_move_prob"}
    assert all(ep["observation"] == first["observation"] for ep in episodes)


async def test_the_seed_is_the_example_seed_unless_overridden(api: httpx.AsyncClient) -> None:
    a, b = await create(api, example=3), await create(api, example=3)
    assert a[0]["seed"] == b[0]["seed"]
    assert a[0]["observation"] == b[0]["observation"]
    other = await create(api, example=3, config={"seed": 1})
    assert other[0]["seed"] != a[0]["seed"]
    forced = await create(api, example=3, seed=99)
    assert forced[0]["seed"] == 99
    assert (await create(api, example=3, split="eval"))[0]["seed"] != a[0]["seed"]
    anywhere = await create(api)
    assert 0 <= anywhere[0]["example"] < 10_000


async def test_a_full_game_rewards_sum_to_the_score(api: httpx.AsyncClient) -> None:
    config = {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}
    [episode] = await create(api, config=config, example=5, run="full")
    results = await play_game(api, episode, random_agent(1))
    assert results[-1]["done"] and not any(r["done"] for r in results[:-1])
    assert [r["turn"] for r in results] == list(range(1, len(results) + 1))
    score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
    assert score["done"] is True
    assert score["weights"] == {"win": 1.0, "format": 0.2, "invalid_move": 1.0}
    assert score["components"]["format"] == 1.0 and score["components"]["invalid_move"] == 0.0
    outcome = score["metrics"]["outcome"]
    assert score["components"]["win"] == {"win": 1.0, "draw": 0.5, "loss": 0.0}[outcome]
    assert score["total"] == math.fsum(
        score["weights"][k] * v for k, v in score["components"].items()
    )
    assert math.isclose(math.fsum(r["reward"] for r in results), score["total"], abs_tol=1e-12)

    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["status"] == "done" and record["done"] is True
    assert record["step_rewards"] == [r["reward"] for r in results]
    assert record["score"] == score
    assert record["turn"] == len(results)
    assert record["run"] == "full" and record["config"]["min_random_move_prob"] == 1.0
    assert record["state"]["board"] == results[-1]["info"]["board"]
    assert record["state"]["winner"] in {"X", "O", "draw"}
    assert "formatted" not in record["state"]  # only the public state
    assert len(record["messages"]) == 2 + 2 * len(results)
    assert record["finished_at"] is not None and record["created_at"] <= record["updated_at"]


async def test_score_is_409_until_done_unless_partial(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=0)
    response = await api.get(f"/v1/episodes/{episode['id']}/score")
    assert response.status_code == 409
    assert error_of(response)["code"] == "episode_not_done"
    await step(api, episode["id"], "<move>oops</move>", 0)
    partial = (await api.get(f"/v1/episodes/{episode['id']}/score?partial=true")).json()
    assert partial["done"] is False
    assert partial["components"] == {"win": 0.0, "format": 0.0, "invalid_move": -0.1}
    assert partial["metrics"]["outcome"] is None


async def test_a_retried_step_returns_the_recorded_result(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=1)
    first = await step(api, episode["id"], answer(4, "x"), 0)
    again = await step(api, episode["id"], answer(4, "x"), 0)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["turn"] == 1
    # A different action for an applied turn is a conflict, not a retry.
    other = await step(api, episode["id"], answer(8, "x"), 0)
    assert other.status_code == 409
    assert error_of(other) == {
        "code": "turn_mismatch",
        "message": "the step is for turn 0, but the episode is at turn 1",
        "details": {"turn": 1},
    }
    ahead = await step(api, episode["id"], answer(8), 5)
    assert error_of(ahead)["code"] == "turn_mismatch"


async def test_steps_without_turn_apply_to_the_current_turn(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=2)
    for expected_turn in (1, 2):
        response = await step(api, episode["id"], "no move")
        assert response.json()["turn"] == expected_turn


async def test_a_finished_episode_refuses_steps_but_replays_its_last(
    api: httpx.AsyncClient,
) -> None:
    [episode] = await create(api, config={"max_turns": 1}, example=0)
    last = await step(api, episode["id"], "pass", 0)
    assert last.json()["done"] is True
    assert (await step(api, episode["id"], "pass", 0)).json() == last.json()
    refused = await step(api, episode["id"], "pass", 1)
    assert refused.status_code == 409 and error_of(refused)["code"] == "episode_done"


async def test_delete_aborts_the_episode(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, example=0)
    response = await api.delete(f"/v1/episodes/{episode['id']}")
    assert response.status_code == 204 and response.content == b""
    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["status"] == "aborted" and record["done"] is True
    assert record["finished_at"] is not None
    refused = await step(api, episode["id"], "x", 0)
    assert refused.status_code == 409 and error_of(refused)["code"] == "episode_done"
    score = await api.get(f"/v1/episodes/{episode['id']}/score")
    assert score.status_code == 200 and score.json()["done"] is True
    assert (await api.delete(f"/v1/episodes/{episode['id']}")).status_code == 204


async def test_group_members_given_the_same_actions_see_the_same_bytes(
    api: httpx.AsyncClient,
) -> None:
    config = {"min_random_move_prob": 0.5, "max_random_move_prob": 0.5}
    episodes = await create(api, config=config, example=9, n=3)
    transcripts = []
    for episode in episodes:
        results = await play_game(api, episode, random_agent(3))
        score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
        for item in [*results, score]:
            item.pop("episode_id")
        transcripts.append((results, score))
    assert transcripts[0] == transcripts[1] == transcripts[2]


async def test_batch_step_results_come_in_order_and_fail_alone(api: httpx.AsyncClient) -> None:
    a, b = await create(api, config=OPTIMAL, example=4, n=2)
    [done] = await create(api, config={"max_turns": 1}, example=4)
    await step(api, done["id"], "pass", 0)
    response = await api.post(
        "/v1/step",
        json={
            "steps": [
                {"episode_id": a["id"], "action": answer(0), "turn": 0},
                {"episode_id": "ep_missing", "action": answer(0)},
                {"episode_id": b["id"], "action": {"role": "assistant", "content": answer(0)}},
                {"episode_id": done["id"], "action": "pass", "turn": 1},
                {"episode_id": a["id"], "action": answer(0), "turn": 5},
                {"episode_id": b["id"], "action": "x" * 70_000},
            ]
        },
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["episode_id"] for r in results] == [
        a["id"], "ep_missing", b["id"], done["id"], a["id"], b["id"],
    ]  # fmt: skip
    assert results[0]["turn"] == 1 and results[2]["turn"] == 1
    assert results[0]["observation"] == results[2]["observation"]
    assert [r.get("error", {}).get("code") for r in results] == [
        None, "episode_not_found", None, "episode_done", "turn_mismatch", "payload_too_large",
    ]  # fmt: skip


async def test_batch_steps_of_one_episode_apply_in_order(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=4)
    steps = [{"episode_id": episode["id"], "action": "bad", "turn": t} for t in range(3)]
    results = (await api.post("/v1/step", json={"steps": steps})).json()["results"]
    assert [r["turn"] for r in results] == [1, 2, 3]


async def test_a_perfect_player_draws_over_http(api: httpx.AsyncClient) -> None:
    for example in range(6):
        [episode] = await create(api, config=OPTIMAL, example=example)
        results = await play_game(api, episode, perfect_agent)
        assert results[-1]["info"]["winner"] == "draw"


async def test_health_readiness_and_openapi(api: httpx.AsyncClient) -> None:
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    assert (await api.get("/readyz")).json() == {"status": "ready"}
    schema = (await api.get("/openapi.json")).json()
    assert {
        "/v1/environments",
        "/v1/episodes",
        "/v1/step",
        "/v1/episodes/{episode_id}/step",
        "/v1/episodes/{episode_id}/score",
        "/v1/episodes/{episode_id}",
    } <= set(schema["paths"])
    assert "ErrorResponse" in schema["components"]["schemas"]
    body = schema["paths"]["/v1/step"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/BatchStepRequest"}
    refs = set(_refs(schema))
    assert refs <= {f"#/components/schemas/{name}" for name in schema["components"]["schemas"]}


def _refs(node: object) -> list[str]:
    """Every ``$ref`` in a JSON document."""
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []
