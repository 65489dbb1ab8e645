"""Verifiers 0.4 tasksets hosted by Wander (``WANDER_VERIFIERS``), served by ``wander
serve`` from the venv holding verifiers (tests/interop.py):

- ``vf/hot-cold`` and ``vf/drifting``: tests/vf_tasksets/, written only against
  ``verifiers.v1``'s public API (a multi-turn env playing the user, seeded as Verifiers'
  TextArena taskset is; one that reads the clock);
- ``vf/ledger`` and ``vf/bank``: tests/vf_tasksets/, tool tasksets (an MCP server per
  episode; bank's is taskset-scoped, one per evaluation under ``vf-eval``);
- ``vf/marble-v1``: a published taskset (``marble-v1`` from PyPI), unchanged.

The replies come from a script (tests/scripted_model.py) served as an OpenAI-compatible
endpoint, so that ``vf-eval`` running a taskset itself, ``vf-eval`` playing it through
Wander's own ``wander`` taskset, and a Wander client send the same replies: the rewards
must be the same three ways.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests import hosted
from tests.hosted import ROOT, TIMEOUT, hosted_steps, record, serve, step
from tests.interop import interop_venv
from tests.test_grpo import train_command
from wander.cli import app as cli
from wander.client import WanderClient
from wander.testing import ServiceProcess, wait_until

TASKSETS = ROOT / "tests" / "vf_tasksets"
LIVE_EPISODES = 4
"""Episodes whose worker a service keeps live (``WANDER_ENV_LIVE_EPISODES``)."""
pytestmark = pytest.mark.timeout(1200)  # a first run builds the venv; vf-eval takes a while


@pytest.fixture(scope="module")
def python() -> Path:
    return interop_venv("verifiers")


@pytest.fixture(scope="module")
def openenv_server() -> Iterator[ServiceProcess]:
    """OpenEnv's own server of tests/openenv_envs.py's GuessNumber (OpenEnv 0.10): what
    Verifiers' built-in ``openenv`` taskset plays, hosted."""
    process = ServiceProcess(
        {"PYTHONPATH": str(ROOT)}, ("tests.openenv_envs:app",), "/health",
        python=str(interop_venv("openenv010")), cwd=str(ROOT), module="uvicorn",
    ).start()  # fmt: skip
    yield process
    process.stop()


@pytest.fixture(scope="module")
def shared(
    redis_url: str, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory,
    openenv_server: ServiceProcess,
) -> Iterator[dict[str, str]]:  # fmt: skip
    """The settings of services sharing one Redis and one archive, as replicas would;
    Verifiers' ``openenv`` taskset pinned to the OpenEnv server, one task, its workers
    in the service's network."""
    pinned = {"openenv": {"base_url": openenv_server.url, "resets": [{"seed": 5}]}}
    with hosted.replicas(
        redis_url, pytestconfig, tmp_path_factory.mktemp("hosted-vf"),
        WANDER_VERIFIERS="hot-cold,drifting,marble-v1,openenv,ledger,bank",
        WANDER_ENV_PROCESSES="vf/ledger,vf/bank",  # their tool servers: processes
        WANDER_ENV_NETWORK="vf/openenv",  # it talks to the OpenEnv server
        WANDER_VERIFIERS_CONFIG=json.dumps(pinned),
        # openenv's run() imports OpenEnv's client, and gradio: ~3 s a fresh worker
        WANDER_ENV_CALL_SECONDS="30",
        WANDER_ENV_LIVE_EPISODES=str(LIVE_EPISODES),
        PYTHONPATH=f"{ROOT}{os.pathsep}{TASKSETS}",
    ) as settings:  # fmt: skip
        yield settings


def create(service: ServiceProcess, env: str = "vf/hot-cold", **body: Any) -> dict[str, Any]:
    return hosted.create(service, env, **body)


@pytest.fixture(scope="module")
def service(python: Path, shared: dict[str, str]) -> Iterator[ServiceProcess]:
    process = serve(python, shared)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def scripted(python: Path) -> Iterator[ServiceProcess]:
    process = hosted.scripted_model(python)
    yield process
    process.stop()


def script(
    scripted: ServiceProcess, messages: list[dict[str, Any]], tools: list[Any] | None = None
) -> dict[str, Any]:
    """The scripted model's reply to ``messages`` (offered ``tools``): its message."""
    answer = httpx.post(
        f"{scripted.url}/v1/chat/completions",
        json={"messages": messages, **({"tools": tools} if tools else {})}, timeout=TIMEOUT,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    message: dict[str, Any] = answer.json()["choices"][0]["message"]
    return message


def play(
    service: ServiceProcess, scripted: ServiceProcess, episode: dict[str, Any],
    replies: list[Any] | None = None, turn: int = 0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Play ``episode`` to its end from ``turn``: the given replies first (text, or whole
    messages), then the script's; every reply sent, as a message."""
    tools = httpx.get(f"{service.url}/v1/environments/{episode['env']}", timeout=TIMEOUT)
    messages = list(record(service, episode["id"])["messages"])
    sent, queued = [], list(replies or [])
    while True:
        reply = queued.pop(0) if queued else script(scripted, messages, tools.json()["tools"])
        if isinstance(reply, str):
            reply = {"role": "assistant", "content": reply}
        answer = step(service, episode["id"], turn, reply)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        sent.append(reply)
        messages += [reply, *body["observation"]]
        turn += 1
        if body["done"]:
            return sent


def score(service: ServiceProcess, episode_id: str) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/v1/episodes/{episode_id}/score", timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_taskset_is_listed_and_configured_by_its_own_fields(service: ServiceProcess) -> None:
    info = httpx.get(f"{service.url}/v1/environments/vf/hot-cold", timeout=TIMEOUT).json()
    assert info["kind"] == "multi_turn"
    assert info["splits"] == {"train": 100, "eval": 100}  # unbounded: its first tasks
    fields = info["config_schema"]["properties"]
    assert {"top", "guesses"} <= fields.keys()
    assert not {"system_prompt", "task", "id"} & fields.keys()  # the operator's, never a request's
    drifting = httpx.get(f"{service.url}/v1/environments/vf/drifting", timeout=TIMEOUT).json()
    assert drifting["splits"] == {"train": 3, "eval": 3}  # bounded: its tasks
    wide = create(service, config={"top": 50}, seed=1)
    assert wide["observation"] == [
        {"role": "system", "content": "Find the secret number. Reply with one number."},
        {"role": "user", "content": "I am thinking of a number from 1 to 50."},
    ]
    for hostile in ({"system_prompt": "/etc/passwd"}, {"task": {"rewards": {}}}, {"top": "x"}):
        refused = httpx.post(
            f"{service.url}/v1/episodes",
            json={"env": "vf/hot-cold", "config": hostile}, timeout=TIMEOUT,
        )  # fmt: skip
        assert refused.status_code == 422, refused.text
    failing = httpx.post(  # its env fails before the first model call: randint(1, 0)
        f"{service.url}/v1/episodes", json={"env": "vf/hot-cold", "config": {"top": 0}},
        timeout=TIMEOUT,
    )  # fmt: skip
    assert failing.status_code == 422 and failing.json()["error"]["code"] == "env_error"
    beyond = httpx.post(
        f"{service.url}/v1/episodes", json={"env": "vf/drifting", "example": 3}, timeout=TIMEOUT
    )
    assert beyond.status_code == 422 and "below 3" in beyond.text


def test_a_game_is_deterministic_and_identical_across_a_group(
    service: ServiceProcess, scripted: ServiceProcess
) -> None:
    first, second = create(service, example=4, seed=7), create(service, example=4, seed=7)
    assert play(service, scripted, first) == play(service, scripted, second)
    assert record(service, first["id"])["messages"] == record(service, second["id"])["messages"]
    group = httpx.post(
        f"{service.url}/v1/episodes", json={"env": "vf/hot-cold", "n": 3, "example": 6},
        timeout=TIMEOUT,
    )  # fmt: skip
    assert group.status_code == 201, group.text
    members = group.json()["episodes"]
    games = [play(service, scripted, episode, ["10", "11"]) for episode in members]
    assert all(game == games[0] for game in games)
    transcripts = [record(service, episode["id"])["messages"] for episode in members]
    assert all(transcript == transcripts[0] for transcript in transcripts)


def test_a_game_begun_on_a_killed_service_ends_on_another_as_uninterrupted(
    python: Path, shared: dict[str, str], service: ServiceProcess, scripted: ServiceProcess
) -> None:
    reference = create(service, example=9)
    replies = play(service, scripted, reference, ["1", "20"])
    assert len(replies) > 2
    first = serve(python, shared)
    try:
        episode = create(first, example=9)
        for turn, content in enumerate(replies[:2]):
            assert step(first, episode["id"], turn, content).status_code == 200
        assert first.process is not None
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(30)
    finally:
        first.stop()
    assert play(service, scripted, episode, replies[2:], turn=2) == replies[2:]
    resumed, expected = record(service, episode["id"]), record(service, reference["id"])
    assert resumed["messages"] == expected["messages"]
    assert {**resumed["score"], "episode_id": None} == {**expected["score"], "episode_id": None}
    assert resumed["done"] is True


def test_a_taskset_that_replays_differently_fails_its_episode(
    service: ServiceProcess, scripted: ServiceProcess
) -> None:
    """Live in its worker, the clock-reading env goes on; once its worker has gone to
    episodes stepped since (``LIVE_EPISODES``), its next step replays, and the replay
    tells at the first answer that read the clock."""
    episode = create(service, "vf/drifting")
    assert step(service, episode["id"], 0, "hello").status_code == 200
    assert step(service, episode["id"], 1, "again").status_code == 200
    for seed in range(LIVE_EPISODES):
        assert step(service, create(service, seed=seed)["id"], 0, "10").status_code == 200
    replayed = step(service, episode["id"], 2, "and again")
    assert replayed.status_code == 422, replayed.text
    error = replayed.json()["error"]
    assert error["code"] == "env_nondeterministic"
    assert error["details"] == {"turn": 1}


def test_an_episode_stays_live_in_its_worker_between_steps(
    service: ServiceProcess, scripted: ServiceProcess
) -> None:
    """An episode created alone is live in its create's worker from its first step."""
    before = hosted_steps(service, "vf/hot-cold")
    replies = play(service, scripted, create(service, example=11), ["1", "2"])
    after = hosted_steps(service, "vf/hot-cold")
    assert len(replies) >= 3
    assert after.get("replayed", 0) == before.get("replayed", 0)
    assert after["live"] - before.get("live", 0) == len(replies)


LEDGER_TOOL = {
    "type": "function",
    "function": {
        "name": "ledger_balance",
        "description": "The balance of an account, in whole dollars.",
        "parameters": {
            "type": "object",
            "properties": {"account": {"title": "Account", "type": "string"}},
            "required": ["account"],
            "title": "balanceArguments",
        },
    },
}


def call(name: str, arguments: str, ident: str = "c1") -> dict[str, Any]:
    """An assistant message calling one tool."""
    function = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "tool_calls": [{"id": ident, "type": "function", "function": function}],
    }


def test_a_tool_taskset_is_played_with_tool_calls_made_on_its_own_server(
    service: ServiceProcess, scripted: ServiceProcess
) -> None:
    """``vf/ledger``'s tool is published as the seat offers it to the model; a step's tool
    calls are made on the episode's own tool server (a process Verifiers starts), their
    results the observation, and a call no tool takes is answered, not fatal. Played by
    the script (one lookup per account, then the richest), it scores 1.1 (``vf-eval``
    gives the same replies the same). Evicted from its worker, an episode replays its
    tool calls, the tool server's state with them: ``frugal`` counts the lookup made
    before the eviction (a replay that skipped it would score 1.1 again)."""
    info = httpx.get(f"{service.url}/v1/environments/vf/ledger", timeout=TIMEOUT).json()
    assert (info["kind"], info["tools"]) == ("tool", [LEDGER_TOOL])
    reference = create(service, "vf/ledger", example=0)
    assert reference["observation"][-1]["content"].startswith("Which of these accounts")
    assert len(play(service, scripted, reference)) == 4  # three lookups and the answer
    assert score(service, reference["id"])["components"] == pytest.approx(
        {"richest": 1.0, "frugal": 0.1}
    )
    episode = create(service, "vf/ledger", example=0)
    before = hosted_steps(service, "vf/ledger")
    answers = [
        step(service, episode["id"], 0, call("ledger_balance", '{"account": "zed"}')),
        step(service, episode["id"], 1, call("ledger_wire", "{}", "c2")),
    ]
    for seed in range(LIVE_EPISODES):  # other episodes take every kept worker
        assert step(service, create(service, seed=seed)["id"], 0, "10").status_code == 200
    answers.append(step(service, episode["id"], 2, call("ledger_balance", "[1]", "c3")))
    assert [a.status_code for a in answers] == [200] * 3, service.logs()[-3000:]
    assert [a.json()["observation"] for a in answers] == [
        [{"role": "tool", "tool_call_id": "c1", "content": "no account named 'zed'"}],
        [{"role": "tool", "tool_call_id": "c2", "content": "Error: unknown tool 'ledger_wire'"}],
        [{"role": "tool", "tool_call_id": "c3",
          "content": "Error: the arguments must be a JSON object"}],
    ]  # fmt: skip
    play(service, scripted, episode, turn=3)
    after = hosted_steps(service, "vf/ledger")
    assert after["replayed"] - before.get("replayed", 0) == 1  # the third step
    assert score(service, episode["id"])["components"] == pytest.approx(
        {"richest": 1.0, "frugal": 0.0}
    )  # four lookups for three accounts
    plain = create(service, "vf/hot-cold")
    refused = step(service, plain["id"], 0, call("ledger_balance", "{}"))
    assert refused.json()["observation"][0]["content"].startswith("Not a reply")


def test_a_taskset_scoped_tool_server_is_started_for_each_episode(
    service: ServiceProcess,
) -> None:
    """``vf/bank``'s server is the taskset's (``Taskset.toolsets``): Wander starts it with
    each episode, as ``vf-eval`` does with an evaluation. Its config (where it runs, its
    URL) is the operator's: a request cannot point it elsewhere."""
    info = httpx.get(f"{service.url}/v1/environments/vf/bank", timeout=TIMEOUT).json()
    assert [tool["function"]["name"] for tool in info["tools"]] == ["bank_name"]
    assert "bank" not in info["config_schema"]["properties"]
    elsewhere = {"bank": {"url": "http://127.0.0.1:1/mcp"}}
    refused = httpx.post(
        f"{service.url}/v1/episodes", json={"env": "vf/bank", "config": elsewhere},
        timeout=TIMEOUT,
    )  # fmt: skip
    assert refused.status_code == 422, refused.text
    episode = create(service, "vf/bank")
    asked = step(service, episode["id"], 0, call("bank_name", "{}"))
    assert asked.json()["observation"] == [
        {"role": "tool", "tool_call_id": "c1", "content": "Wander Savings"}
    ]
    said = step(service, episode["id"], 1, "Wander Savings")
    assert said.json()["done"] is True
    assert score(service, episode["id"])["components"] == {"named": 1.0}


def vf_eval(python: Path, config: str, tmp_path: Path) -> list[dict[str, Any]]:
    """``vf-eval @ config`` (TOML text) with the test tasksets importable; its traces."""
    folder = tmp_path / f"eval-{len(list(tmp_path.glob('eval-*')))}"
    folder.mkdir()
    (folder / "eval.toml").write_text(config.replace("\n        ", "\n"))
    command = [python.parent / "vf-eval", "@", "eval.toml", "--no-rich", "--output-dir", "out"]
    env = {
        **os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{TASKSETS}",
    }  # fmt: skip
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    [traces] = (folder / "out").glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    failures = [error["message"] for ep in episodes for error in ep["errors"]]
    if failures and "Failed to fetch" in failures[0]:
        pytest.skip(f"uv could not install the null harness's packages: {failures[0]}")
    assert not failures, failures[:3]
    return [trace for episode in episodes for trace in episode["traces"]]


def own_eval(python: Path, scripted: ServiceProcess, tmp_path: Path, taskset: str,
             seat: str, tasks: int, extra: str = "") -> dict[int, dict[str, Any]]:  # fmt: skip
    """``vf-eval`` running ``taskset`` itself (the null harness, in a local process) with
    the scripted model: each task's trace, by its index (``extra``: more of the taskset's
    fields, as TOML)."""
    traces = vf_eval(python, f"""
        model = "scripted"
        push = false
        num_rollouts = 1
        max_concurrent = {tasks}

        [client]
        base_url = "{scripted.url}/v1"

        [select]
        limit = {tasks}

        [env.taskset]
        id = "{taskset}"
        {extra.strip()}

        [env.{seat}.harness]
        id = "null"

        [env.{seat}.runtime]
        type = "subprocess"
    """, tmp_path)  # fmt: skip
    return {trace["task"]["data"]["idx"]: trace for trace in traces}


def weighted(trace: dict[str, Any]) -> dict[str, float]:
    return {name: r["score"] * r["weight"] for name, r in trace["rewards"].items()}


@pytest.fixture(scope="module")
def hot_cold_alone(
    python: Path, scripted: ServiceProcess, tmp_path_factory: pytest.TempPathFactory
) -> dict[int, dict[str, Any]]:
    """``vf-eval`` running hot-cold itself on its first two tasks: the traces, by task."""
    return own_eval(python, scripted, tmp_path_factory.mktemp("alone"), "hot-cold", "player", 2)


def assert_scored_as(service: ServiceProcess, episode_id: str, trace: dict[str, Any]) -> None:
    """Wander's score of the episode is what ``vf-eval`` recorded on ``trace``: one
    component per reward (its score times its weight), the total Verifiers' reward."""
    ours = score(service, episode_id)
    assert ours["components"] == pytest.approx(weighted(trace), abs=1e-12)
    assert ours["total"] == pytest.approx(math.fsum(weighted(trace).values()), abs=1e-12)
    for name, reward in trace["rewards"].items():
        assert ours["metrics"][f"{name}.score"] == reward["score"]
        assert ours["metrics"][f"{name}.weight"] == reward["weight"]


def test_the_rewards_are_verifiers_own(
    service: ServiceProcess, scripted: ServiceProcess, hot_cold_alone: dict[int, dict[str, Any]]
) -> None:
    """The same tasks, the same replies: the score is the one ``vf-eval`` records."""
    for index, trace in hot_cold_alone.items():
        episode = create(service, "vf/hot-cold", example=index)
        play(service, scripted, episode)
        assert_scored_as(service, episode["id"], trace)


def test_a_published_taskset_is_hosted_with_the_rewards_verifiers_gives_it(
    python: Path, service: ServiceProcess, scripted: ServiceProcess, tmp_path: Path
) -> None:
    """marble-v1 from PyPI, unchanged: its physics scores the layout the script sends,
    through Wander as through ``vf-eval``."""
    theirs = own_eval(python, scripted, tmp_path, "marble-v1", "agent", tasks=1)
    for index, trace in theirs.items():
        episode = create(service, "vf/marble-v1", example=index)
        play(service, scripted, episode)
        assert_scored_as(service, episode["id"], trace)
        assert trace["rewards"]["scored"]["score"] == 1.0  # the script knows each solution


def test_vf_eval_through_wander_gives_the_rewards_of_vf_eval_alone(
    python: Path, service: ServiceProcess, scripted: ServiceProcess, tmp_path: Path,
    hot_cold_alone: dict[int, dict[str, Any]],
) -> None:  # fmt: skip
    """``vf-eval`` playing ``vf/hot-cold`` through Wander's ``wander`` taskset: a Verifiers
    user who moves the taskset behind Wander gets the rewards ``vf-eval`` gives it alone."""
    through = vf_eval(python, f"""
        model = "scripted"
        push = false
        num_rollouts = 1
        max_concurrent = 2

        [client]
        base_url = "{scripted.url}/v1"

        [env.taskset]
        id = "wander"
        url = "{service.url}"
        env = "vf/hot-cold"
        split = "train"
        examples = 2
        run = "vf-round-trip"
    """, tmp_path)  # fmt: skip
    assert len(through) == 2
    for trace in through:
        alone = hot_cold_alone[trace["task"]["data"]["example"]]
        assert weighted(trace) == pytest.approx(weighted(alone), abs=1e-12)
        wander = trace["info"]["wander"]
        assert wander["done"] is True
        assert wander["total"] == pytest.approx(math.fsum(weighted(alone).values()))


def test_grpo_trains_two_steps_on_a_hosted_taskset(service: ServiceProcess, tmp_path: Path) -> None:
    """`wander train grpo` with `env = "vf/hot-cold"`: the tiny model's rollouts are played
    on the hosted taskset like any environment's."""
    command = train_command(
        tmp_path / "grpo-vf.toml", service.url, tmp_path, 2, env="vf/hot-cold",
        save_strategy="no", use_cpu=True,
    )  # fmt: skip
    trained = CliRunner(env={"COLUMNS": "200"}).invoke(cli, command)
    assert trained.exit_code == 0, trained.output
    with WanderClient(service.url) as client:
        wait_until(
            lambda: any(r.run == "grpo-vf" and r.episodes >= 16 for r in client.runs().runs),
            "the hosted run's 16 episodes archived",
        )
        page = client.episodes("grpo-vf", limit=100)
    assert page.total == 16 and {e.env for e in page.episodes} == {"vf/hot-cold"}
    assert all(e.turn >= 1 for e in page.episodes)


def test_verifiers_own_openenv_taskset_plays_the_server_its_operator_pins(
    python: Path, service: ServiceProcess, scripted: ServiceProcess,
    openenv_server: ServiceProcess, tmp_path: Path,
) -> None:  # fmt: skip
    """Verifiers' built-in ``openenv`` taskset plays an OpenEnv server, the operator
    pinning which (a request cannot point it elsewhere), its workers in the service's
    network because ``WANDER_ENV_NETWORK`` names it (tests/test_worker_isolation.py:
    a worker not granted it reaches nothing); its rewards are those ``vf-eval`` gets
    running the taskset itself."""
    info = httpx.get(f"{service.url}/v1/environments/vf/openenv", timeout=TIMEOUT).json()
    assert "base_url" not in info["config_schema"]["properties"]  # pinned: not a request's
    assert info["splits"] == {"train": 1, "eval": 1}  # one task per reset
    extra = f'base_url = "{openenv_server.url}"\nresets = [{{seed = 5}}]'
    [trace] = own_eval(python, scripted, tmp_path, "openenv", "player", 1, extra).values()
    assert trace["rewards"]["openenv_reward"]["score"] == 1.0  # halving finds it
    episode = create(service, "vf/openenv", example=0)
    play(service, scripted, episode)
    assert_scored_as(service, episode["id"], trace)
