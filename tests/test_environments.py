"""The environments beyond tic-tac-toe, over HTTP: listing, determinism, rubrics, bad input."""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

import httpx
import pytest

from tests.helpers import IN_THE_SHARED_LOOP, create, error_of, step, tool_call, tools
from wander.service.envs.double_check.env import DoubleCheck, DoubleCheckConfig
from wander.service.envs.seeding import example_seed
from wander.service.envs.sql.database import run_query
from wander.service.envs.sql.questions import pick

SHARED_SERVICE = True
pytestmark = IN_THE_SHARED_LOOP


BUILT_IN = ["tictactoe", "tictactoe_move", "reverse_text", "double_check", "sql"]
RG = ["rg/basic_arithmetic", "rg/chain_sum", "rg/word_sorting", "rg/letter_counting",
      "rg/spell_backward", "rg/base_conversion"]  # fmt: skip


async def play(api: httpx.AsyncClient, env: str, actions: list[Any], **body: Any) -> dict[str, Any]:
    """Create an episode, send ``actions`` in order; returns the results and the score."""
    [episode] = await create(api, env=env, **body)
    results = []
    for turn, action in enumerate(actions):
        response = await step(api, episode["id"], action, turn)
        assert response.status_code == 200, response.text
        results.append({k: v for k, v in response.json().items() if k != "episode_id"})
    score = (await api.get(f"/v1/episodes/{episode['id']}/score?partial=true")).json()
    return {"episode": episode, "results": results, "score": score}


async def test_listed_with_schema_and_rewards(api: httpx.AsyncClient) -> None:
    listed = {env["name"] for env in (await api.get("/v1/environments")).json()["environments"]}
    assert set(BUILT_IN + RG) <= listed
    assert len([name for name in listed if name.startswith("rg/")]) >= 90
    for name in BUILT_IN + RG:
        info = (await api.get(f"/v1/environments/{name}")).json()
        assert info["name"] == name and info["config_schema"]["type"] == "object"
        assert info["reward_components"] and all(c["weight"] > 0 for c in info["reward_components"])
        assert info["splits"]["train"] > 0 and info["splits"]["eval"] > 0


# reverse_text


async def test_reverse_text_scores_by_lcs(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, env="reverse_text", example=3, split="eval")
    text = episode["observation"][1]["content"]
    assert episode["info"] == {"text": text, "answered": False}
    tagged = f"<reversed_text>{text[::-1]}</reversed_text>"
    perfect = await play(api, "reverse_text", [tagged], example=3, split="eval")
    assert perfect["results"][0]["done"] is True and perfect["results"][0]["observation"] == []
    assert perfect["score"]["components"] == {"lcs": 1.0, "format": 1.0}
    assert perfect["score"]["total"] == 1.2
    half = text[::-1][: len(text) // 2]
    thought = f"<think>hm</think><reversed_text>{half}</reversed_text>"
    partial = await play(api, "reverse_text", [thought], example=3, split="eval")
    expected = SequenceMatcher(None, half, text[::-1], autojunk=False).ratio()
    assert partial["score"]["components"] == {"lcs": expected, "format": 1.0}
    untagged = await play(api, "reverse_text", [text[::-1]], example=3, split="eval")
    assert untagged["score"]["components"] == {"lcs": 0.0, "format": 0.0}


async def test_reverse_text_ships_a_thousand_paragraphs(api: httpx.AsyncClient) -> None:
    splits = (await api.get("/v1/environments/reverse_text")).json()["splits"]
    assert splits["train"] + splits["eval"] >= 1000 and splits["eval"] >= 100


# double_check


def problem(example: int) -> dict[str, Any]:
    env = DoubleCheck()
    return env.examples(DoubleCheckConfig(), "train")[example]


async def test_double_check_asks_again_and_scores_the_final_answer(api: httpx.AsyncClient) -> None:
    answer = problem(5)["answer"]
    right, wrong = f"<answer>{answer}</answer>", f"<answer>{answer + 1}</answer>"
    again = f"<think>yes</think><answer> {answer:,} </answer>"
    steady = await play(api, "double_check", [right, again], example=5)
    assert steady["results"][0]["observation"][0]["content"].startswith("Are you sure?")
    assert steady["score"]["components"] == {"correct": 1.0, "format": 1.0}
    assert steady["score"]["metrics"]["changed_answer"] is True  # "1,234" vs "1234": same number
    flipped = await play(api, "double_check", [right, wrong], example=5)
    assert flipped["score"]["components"] == {"correct": 0.0, "format": 1.0}
    assert flipped["score"]["metrics"]["first_correct"] is True
    recovered = await play(api, "double_check", [wrong, f"{answer}"], example=5)
    assert recovered["score"]["components"] == {"correct": 0.0, "format": 0.5}


async def test_double_check_difficulty_levels(api: httpx.AsyncClient) -> None:
    levels = [problem(i)["difficulty"] for i in range(8)]
    assert levels == [1, 2, 3, 4, 1, 2, 3, 4]
    for level in (1, 4):
        [episode] = await create(api, env="double_check", config={"difficulty": level}, example=0)
        assert episode["info"]["difficulty"] == level
    bad = await api.post("/v1/episodes", json={"env": "double_check", "config": {"difficulty": 9}})
    assert bad.status_code == 422


# sql


async def test_sql_scripted_agent_scores_full_reward(api: httpx.AsyncClient) -> None:
    info = (await api.get("/v1/environments/sql")).json()
    assert [t["function"]["name"] for t in info["tools"]] == [
        "list_tables",
        "describe_table",
        "run_sql",
    ]
    for example in range(20):
        [episode] = await create(api, env="sql", example=example, split="eval")
        question, _ = pick(example_seed("sql", "eval", 0, example), example)
        assert episode["observation"][1]["content"] == question.text
        reference = question.sql
        for value in question.params:  # inline the parameters, as a model would write them
            reference = reference.replace("?", repr(value), 1)
        listed = await step(api, episode["id"], tools(tool_call("list_tables", "c1")), 0)
        tables = listed.json()["observation"][0]
        assert tables["role"] == "tool" and tables["tool_call_id"] == "c1"
        assert tables["content"].split("\n") == ["customers", "order_items", "orders", "products"]
        ran = await step(api, episode["id"], tools(tool_call("run_sql", "c2", query=reference)), 1)
        value = ran.json()["observation"][0]["content"].split("\n")[1].split(" | ")[0]
        done = await step(api, episode["id"], f"<answer>{value}</answer>", 2)
        assert done.json()["done"] is True
        score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
        assert score["components"] == {"correct": 1.0, "format": 1.0, "efficiency": 1.0}, question
        assert score["metrics"]["tool_calls"] == 2 and score["metrics"]["sql_errors"] == 0


HOSTILE = [
    ("DROP TABLE orders", "not authorized"),
    ("DELETE FROM orders", "not authorized"),
    ("ATTACH DATABASE '/tmp/wander-escape.db' AS x", "not authorized"),
    ("PRAGMA writable_schema = ON", "not authorized"),
    ("SELECT load_extension('/tmp/x')", "not authorized"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
     "was stopped"),
    ("SELECT 1; DROP TABLE orders", "one statement"),
]  # fmt: skip


@pytest.mark.parametrize(("query", "refusal"), HOSTILE)
async def test_sql_refuses_hostile_queries_and_goes_on(
    api: httpx.AsyncClient, query: str, refusal: str
) -> None:
    """A runaway query is stopped by the query's own deadline ("was stopped"), not the
    service's: how long each takes to be refused is in ``python -m bench.timings``."""
    [episode] = await create(api, env="sql", example=1)
    hostile = await step(api, episode["id"], tools(tool_call("run_sql", "h", query=query)), 0)
    reply = hostile.json()["observation"][0]["content"]
    assert reply.startswith("Error:") and refusal in reply, reply
    count = tools(tool_call("run_sql", "n", query="SELECT COUNT(*) FROM orders"))
    after = await step(api, episode["id"], count, 1)
    assert after.status_code == 200 and after.json()["observation"][0]["content"].startswith(
        "COUNT"
    )
    seed = episode["seed"]
    assert after.json()["observation"][0]["content"].split("\n")[1] == str(
        run_query(seed, "SELECT COUNT(*) FROM orders")[1][0][0]
    )
    score = (await api.get(f"/v1/episodes/{episode['id']}/score?partial=true")).json()
    assert score["metrics"]["sql_errors"] == 1


async def test_sql_bad_tool_calls_get_clear_messages(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, env="sql", example=2, config={"max_turns": 3})
    bad_json = {
        "id": "b",
        "type": "function",
        "function": {"name": "run_sql", "arguments": "{oops"},
    }
    unknown = tool_call("drop_everything", "u")
    missing = tool_call("describe_table", "m", table="nope")
    result = (await step(api, episode["id"], tools(bad_json, unknown, missing), 0)).json()
    replies = [m["content"] for m in result["observation"]]
    assert replies[0].startswith("Error: Expecting property name")
    assert "unknown tool 'drop_everything'" in replies[1]
    assert "no table named 'nope'" in replies[2]
    await step(api, episode["id"], tools(tool_call("list_tables", "l")), 1)
    last = (await step(api, episode["id"], tools(tool_call("list_tables", "l2")), 2)).json()
    assert last["done"] is True and "limit of 3 turns" in last["observation"][-1]["content"]
    score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
    assert score["components"] == {"correct": 0.0, "format": 0.0, "efficiency": 0.0}
    assert score["metrics"] == {"correct": False, "answered": False, "tool_calls": 5,
                                "sql_errors": 3, "refused_calls": 0, "turns": 3}  # fmt: skip


# reasoning-gym


@pytest.mark.parametrize("name", RG)
async def test_reasoning_gym_answers_from_the_dataset_score_1(
    api: httpx.AsyncClient, name: str
) -> None:
    from wander.service.envs import Registry

    env = Registry.from_entry_points()[name]
    answer = env.entry(env.Config(), "eval", 7)["answer"]
    right = await play(api, name, [f"<answer>{answer}</answer>"], example=7, split="eval")
    assert (
        right["episode"]["observation"][1]["content"]
        == env.entry(env.Config(), "eval", 7)["question"]
    )
    assert right["score"]["components"] == {"correct": 1.0, "format": 1.0}
    wrong = await play(api, name, ["no idea"], example=7, split="eval")
    assert wrong["score"]["components"] == {"correct": 0.0, "format": 0.0}


async def test_reasoning_gym_options_pass_through_and_are_checked(api: httpx.AsyncClient) -> None:
    options = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    [episode] = await create(api, env="rg/basic_arithmetic", config={"options": options}, example=0)
    question = episode["observation"][1]["content"]
    assert sum(char.isdigit() for char in question) == 2
    for bad in [{"bogus": 1}, {"min_terms": 5, "max_terms": 2}]:
        response = await api.post(
            "/v1/episodes", json={"env": "rg/basic_arithmetic", "config": {"options": bad}}
        )
        assert response.status_code == 422, response.text
        assert error_of(response)["code"] == "validation_error"


# every environment


DETERMINISM = {
    "reverse_text": ["<reversed_text>abc</reversed_text>"],
    "tictactoe_move": ["<think>x</think><move>0</move>"],
    "double_check": ["<answer>3</answer>", "<answer>4</answer>"],
    "sql": [tools(tool_call("run_sql", "q", query="SELECT * FROM products")), "<answer>x</answer>"],
    "rg/basic_arithmetic": ["<answer>12</answer>"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DETERMINISM))
async def test_same_inputs_same_transcript_and_score(api: httpx.AsyncClient, name: str) -> None:
    runs = [await play(api, name, DETERMINISM[name], example=4, split="eval") for _ in range(2)]
    first, second = ({**run["score"], "episode_id": None} for run in runs)
    assert runs[0]["results"] == runs[1]["results"]
    assert first == second
    assert runs[0]["episode"]["observation"] == runs[1]["episode"]["observation"]
