"""Verifiers 0.4, the real package, against a real ``wander serve``: ``vf-eval`` with the
Wander taskset, and Verifiers' own OpenEnvTaskset at ``/openenv/tictactoe``, both
played by ``wander policy serve``'s minimax baseline (no model, no GPU); and MCP's own
client (``mcp``, which Verifiers' tool harnesses use) on ``sql``'s MCP endpoint.

Verifiers lives in a venv of its own (tests/interop.py; it pins mcp 2.0), with Wander
installed editable with its ``verifiers`` extra and ``uv``: the ``null`` harness runs its
chat program through ``uv run --script``, which installs that program's packages (openai,
mcp, httpx...) from PyPI into ``~/.cache/uv`` the first time.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from statistics import fmean
from typing import Any

import httpx
import pytest

from tests import hosted
from tests.helpers import migrate
from tests.interop import interop_venv
from wander.client import RunSummary, WanderClient
from wander.testing import ServiceProcess

pytestmark = pytest.mark.timeout(1200)  # a first run builds the venv; a vf run takes minutes

GAMES = 4  # 2 examples, 2 rollouts each: each rollout runs a harness process of its own
NO_REGISTRY = ("Failed to fetch", "error sending request", "dns error", "No solution found")
"""What uv says when it cannot reach PyPI for the harness's packages."""


@pytest.fixture(scope="module")
def vf_bin() -> Path:
    return interop_venv("verifiers").parent


@pytest.fixture(scope="module")
def minimax() -> Iterator[ServiceProcess]:
    process = ServiceProcess(
        {}, command=("policy", "serve", "--policy", "minimax", "--seed", "3"), health="/v1/models"
    ).start()
    yield process
    process.stop()


def vf_eval(vf_bin: Path, config: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Run ``vf-eval @ config`` (TOML text) and return its episodes (``traces.jsonl``)."""
    (tmp_path / "eval.toml").write_text(config)
    output = tmp_path / "outputs"
    command = [vf_bin / "vf-eval", "@", "eval.toml", "--no-rich", "--output-dir", output]
    env = {**os.environ, "PATH": f"{vf_bin}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    [traces] = output.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    failures = [error["message"] for ep in episodes for error in ep["errors"]]
    if failures and any(sign in failures[0] for sign in NO_REGISTRY):
        pytest.skip(f"uv could not install the null harness's packages from PyPI: {failures[0]}")
    assert not failures, failures[:3]
    return episodes


def archived_run(url: str, run: str, episodes: int) -> tuple[RunSummary, dict[str, Any]]:
    """The run's summary and its archived episodes by id, once all are archived (the
    archive is written behind the steps)."""
    with WanderClient(url) as wander:
        deadline = time.monotonic() + 30
        while (summary := wander.run(run)).episodes < episodes:
            assert time.monotonic() < deadline, f"{summary.episodes} of {episodes} archived"
            time.sleep(0.2)
        page = wander.episodes(run, limit=1000)
    return summary, {record.id: record for record in page.episodes}


def test_vf_eval_plays_the_wander_taskset_with_wanders_rewards(
    live: ServiceProcess, minimax: ServiceProcess, vf_bin: Path, tmp_path: Path
) -> None:
    run = f"vf-{uuid.uuid4().hex[:8]}"
    config = f"""
        model = "minimax"
        push = false
        num_rollouts = 2
        max_concurrent = {GAMES}

        [client]
        base_url = "{minimax.url}/v1"

        [env.taskset]
        id = "wander"
        url = "{live.url}"
        env = "tictactoe"
        examples = {GAMES // 2}
        run = "{run}"
    """
    episodes = vf_eval(vf_bin, config.replace("\n        ", "\n"), tmp_path)
    assert len(episodes) == GAMES and all(episode["ok"] for episode in episodes)
    traces = [trace for episode in episodes for trace in episode["traces"]]
    assert len(traces) == GAMES
    assert sorted(t["task"]["data"]["example"] for t in traces) == sorted(
        list(range(GAMES // 2)) * 2
    )
    summary, archived = archived_run(live.url, run, GAMES)
    assert summary.statuses == {"done": GAMES}
    weights = {"win": 1.0, "format": 0.2, "invalid_move": 1.0}  # tic-tac-toe's
    for trace in traces:
        wander = trace["info"]["wander"]
        record = archived.pop(wander["episode_id"])
        assert (wander["run"], wander["done"], record.status) == (run, True, "done")
        # One reward per score component, with its weight: Verifiers' total is Wander's.
        assert trace["rewards"] == {
            name: {"score": value, "weight": weights[name]}
            for name, value in record.score.components.items()
        }
        vf_total = math.fsum(r["score"] * r["weight"] for r in trace["rewards"].values())
        assert vf_total == record.score.total == wander["total"]
        assert wander["outcome"] == record.score.outcome in {"win", "draw"}  # minimax's
        # The model saw Wander's messages and its replies were the steps: the trace is
        # the archived transcript, less what came after the last reply.
        seen = [node["message"] for node in trace["nodes"]]
        transcript = [m.model_dump(mode="json") for m in record.messages]
        assert seen == transcript[: len(seen)] and seen[-1]["role"] == "assistant"
        assert "assistant" not in {m["role"] for m in transcript[len(seen) :]}
    assert archived == {}  # no other episode in the run
    totals = [math.fsum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in traces]
    assert summary.reward is not None
    assert math.isclose(summary.reward.mean, fmean(totals), abs_tol=1e-12)
    assert (summary.reward.min, summary.reward.max) == (min(totals), max(totals))
    for name, mean in summary.components.items():
        assert math.isclose(mean, fmean(t["rewards"][name]["score"] for t in traces))


KEY = "vf-tools-key"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A real `wander serve` that wants a key (in-process store, SQLite archive)."""
    database = f"sqlite:///{tmp_path_factory.mktemp('keyed')}/archive.db"
    migrate(database)
    settings = {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": "",
                "WANDER_API_KEYS": f"lab:trainer:{KEY}"}  # fmt: skip
    process = ServiceProcess(settings).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def scripted(vf_bin: Path) -> Iterator[ServiceProcess]:
    process = hosted.scripted_model(vf_bin / "python")
    yield process
    process.stop()


def tool_calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each tool call of ``messages``: its name and arguments (under ``function`` in
    OpenAI's shape, Wander's; beside the id in Verifiers' traces)."""
    functions = [
        call.get("function", call)
        for message in messages
        for call in message.get("tool_calls") or []
    ]
    return [(function["name"], json.loads(function["arguments"])) for function in functions]


def test_vf_eval_plays_a_tool_environment_each_tool_call_a_step(
    keyed: ServiceProcess, scripted: ServiceProcess, vf_bin: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """``sql`` through the wander taskset: its tools reach the model's harness (Verifiers'
    null harness, its MCP client) from a task-scoped Verifiers toolset, each call a step of
    the rollout's episode; the model's answer after them is the last step. The service
    wants a key, which reaches the tool server through the rollout's state. The script
    answers examples 0 and 1 (list_tables, run_sql, answer); on example 2 it keeps calling
    describe_table until the episode's 3 turns run out on a tool call, which stops the
    harness: no answer is stepped, the episode ended by itself (not aborted)."""
    monkeypatch.setenv("WANDER_API_KEY", KEY)  # vf-eval's, and the archive's reader's
    run = f"vf-sql-{uuid.uuid4().hex[:8]}"
    config = f"""
        model = "scripted"
        push = false
        num_rollouts = 1
        max_concurrent = 3

        [client]
        base_url = "{scripted.url}/v1"

        [env.taskset]
        id = "wander"
        url = "{keyed.url}"
        env = "sql"
        examples = 3
        config = {{max_turns = 3}}
        run = "{run}"

        [env.player]
        max_turns = 6  # a harness that is not stopped fails the test, not its timeout
    """
    episodes = vf_eval(vf_bin, config.replace("\n        ", "\n"), tmp_path)
    traces = {t["task"]["data"]["example"]: t for e in episodes for t in e["traces"]}
    assert sorted(traces) == [0, 1, 2]
    summary, archived = archived_run(keyed.url, run, 3)
    assert summary.statuses == {"done": 3}
    weights = {"correct": 1.0, "format": 0.1, "efficiency": 0.1}  # sql's
    for example, trace in traces.items():
        wander = trace["info"]["wander"]
        record = archived.pop(wander["episode_id"])
        transcript = [m.model_dump(mode="json") for m in record.messages]
        seen = [node["message"] for node in trace["nodes"]]
        # The model's tool calls were the episode's steps, and it saw what they answered.
        assert tool_calls(seen) == tool_calls(transcript)
        said = [m["content"] for m in transcript if m["role"] == "tool"]
        answers = [m["content"] for m in seen if m["role"] == "tool"]
        assert trace["rewards"] == {
            name: {"score": value, "weight": weights[name]}
            for name, value in record.score.components.items()
        }
        assert (wander["done"], record.turn) == (True, 3)
        if example < 2:
            assert [name for name, _ in tool_calls(seen)] == ["list_tables", "run_sql"]
            assert answers == said
            assert seen[-1] == transcript[-1]  # the answer, the last step
            assert record.score.components == {"correct": 1.0, "format": 1.0, "efficiency": 1.0}
        else:
            names = [name for name, _ in tool_calls(seen)]
            assert names == ["list_tables", "describe_table", "describe_table"]
            ending = transcript[-1]["content"]
            assert ending.startswith("The limit of 3 turns was reached")
            # The model was not asked again: its trace ends at its last call.
            assert answers == said[:2] and seen[-1]["role"] == "assistant"
            assert record.score.components["correct"] == 0.0
    assert archived == {}


def test_verifiers_openenv_taskset_plays_wanders_openenv_surface(
    live: ServiceProcess, minimax: ServiceProcess, vf_bin: Path, tmp_path: Path
) -> None:
    base = f"{live.url}/openenv/tictactoe"
    if httpx.get(f"{base}/schema").status_code == 404:
        pytest.skip("no OpenEnv surface in this checkout yet (/openenv/{env})")
    run = f"vf-openenv-{uuid.uuid4().hex[:8]}"
    resets = ", ".join(f'{{example = {i}, run = "{run}"}}' for i in range(2))
    config = f"""
        model = "minimax"
        push = false

        [client]
        base_url = "{minimax.url}/v1"

        [env.taskset]
        id = "openenv"
        base_url = "{base}"
        resets = [{resets}]

        [env.player.harness]
        id = "null"

        [env.player.runtime]
        type = "subprocess"
    """
    episodes = vf_eval(vf_bin, config.replace("\n        ", "\n"), tmp_path)
    assert len(episodes) == 2 and all(episode["ok"] for episode in episodes)
    _, archived = archived_run(live.url, run, 2)
    totals = {record.example: record.score.total for record in archived.values()}
    assert {record.status for record in archived.values()} == {"done"}
    for episode in episodes:
        [trace] = episode["traces"]
        example = trace["task"]["data"]["reset"]["example"]
        # OpenEnvTaskset sums the step rewards; Wander's step rewards sum to its total.
        reward = trace["rewards"]["openenv_reward"]["score"]
        assert math.isclose(reward, totals[example], abs_tol=1e-9)


def test_mcps_own_client_calls_a_tool_environments_tools_on_its_episode(
    live: ServiceProcess, vf_bin: Path
) -> None:
    """``/openenv/sql/mcp?episode_id=...`` is an MCP server to any MCP client: MCP's own
    Python client negotiates (it asks ``server/discover``, then falls back to the
    ``initialize`` handshake), lists ``sql``'s tools and calls them, each call a step of
    the episode the URL names."""
    created = httpx.post(  # the service's first isolated call starts its fork server
        f"{live.url}/v1/episodes", json={"env": "sql", "example": 0}, timeout=120
    )
    assert created.status_code == 201, created.text
    episode = created.json()["episodes"][0]["id"]
    calls = [["list_tables", {}], ["run_sql", {"query": "SELECT count(*) FROM products"}],
             ["drop_tables", {}]]  # fmt: skip
    url = f"{live.url}/openenv/sql/mcp?episode_id={episode}"
    done = subprocess.run(
        [vf_bin / "python", "-m", "tests.mcp_client", url, json.dumps(calls)],
        cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert said["protocol"] == "2025-11-25"
    assert set(said["tools"]) == {"list_tables", "describe_table", "run_sql"}
    assert said["tools"]["run_sql"]["required"] == ["query"]
    [tables], [count], [unknown] = (result["text"] for result in said["results"])
    assert "products" in tables.split() and count.strip().splitlines()[-1].isdigit()
    assert unknown.startswith("Error: unknown tool 'drop_tables'")
    record = httpx.get(f"{live.url}/v1/episodes/{episode}", timeout=60).json()
    assert record["turn"] == 3 and not record["done"]
    assert [m["role"] for m in record["messages"][-2:]] == ["assistant", "tool"]
    stream = httpx.get(url, timeout=60)
    assert stream.status_code == 405 and stream.headers["allow"] == "POST"
