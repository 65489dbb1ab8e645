"""OpenEnv environments hosted by Wander (``WANDER_OPENENV``): tests/openenv_envs.py's
classes, written only against OpenEnv's API, served by ``wander serve`` from the venv
holding OpenEnv 0.10 (tests/interop.py) as ``openenv/guess`` and ``openenv/drift``.

Every step of a hosted episode lands in a fresh worker, so every step rebuilds the
environment by replaying the episode's actions: these tests play through replay
throughout. A game begun on one service is finished on a second one after the first is
killed (``kill -9``), exactly as the same game uninterrupted; the rewards are those
OpenEnv's own server gives for the same seed and actions (OpenEnv's client on both).
"""

from __future__ import annotations

import json
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
from tests.hosted import ROOT, hosted_steps, record, serve, step
from tests.interop import interop_venv
from tests.test_grpo import train_command
from tests.test_openenv_interop import Client
from wander.cli import app as cli
from wander.client import WanderClient
from wander.testing import ServiceProcess, wait_until

HOSTED = "guess=tests.openenv_envs:GuessNumber,drift=tests.openenv_envs:Drifting"
ECHO = "echo=echo_probe.server.echo_probe_environment:EchoProbeEnvironment"
LIVE_EPISODES = 4
"""Episodes whose worker a service keeps live (``WANDER_ENV_LIVE_EPISODES``)."""
pytestmark = pytest.mark.timeout(900)  # a first run builds the venv: minutes


@pytest.fixture(scope="module")
def python() -> Path:
    return interop_venv("openenv010")


@pytest.fixture(scope="module")
def generated(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``echo_probe``, the environment OpenEnv's own ``openenv init``
    writes (its template, shipped in the openenv package: code nobody here wrote)."""
    folder = tmp_path_factory.mktemp("generated")
    subprocess.run(
        [python.parent / "openenv", "init", "echo_probe"], cwd=folder, check=True,
        capture_output=True, timeout=120,
    )  # fmt: skip
    return folder


@pytest.fixture(scope="module")
def shared(
    redis_url: str, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory,
    generated: Path,
) -> Iterator[dict[str, str]]:  # fmt: skip
    """The settings of services sharing one Redis and one archive, as replicas would."""
    with hosted.replicas(
        redis_url, pytestconfig, tmp_path_factory.mktemp("hosted"),
        WANDER_OPENENV=f"{HOSTED},{ECHO}",
        WANDER_ENV_LIVE_EPISODES=str(LIVE_EPISODES),
        PYTHONPATH=f"{ROOT}{os.pathsep}{generated}",
    ) as settings:  # fmt: skip
        yield settings


def create(service: ServiceProcess, env: str = "openenv/guess", **body: Any) -> dict[str, Any]:
    return hosted.create(service, env, **body)


@pytest.fixture(scope="module")
def service(python: Path, shared: dict[str, str]) -> Iterator[ServiceProcess]:
    process = serve(python, shared)
    yield process
    process.stop()


def observed(response: httpx.Response) -> dict[str, Any]:
    """What GuessNumber's observation held (the JSON of the step's user message)."""
    assert response.status_code == 200, response.text
    fields: dict[str, Any] = json.loads(response.json()["observation"][-1]["content"])
    return fields


def halving(service: ServiceProcess, episode_id: str, turn: int = 0) -> list[int]:
    """Play to the end by halving, from ``turn``; the guesses."""
    low, high, guesses = 1, 100, []
    while True:
        number = (low + high) // 2
        answer = step(service, episode_id, turn, json.dumps({"guess": number}))
        hint = observed(answer)["hint"]
        guesses.append(number)
        turn += 1
        if answer.json()["done"]:
            return guesses
        low, high = (number + 1, high) if "higher" in hint else (low, number - 1)


def test_the_hosted_environments_are_listed_with_their_config(service: ServiceProcess) -> None:
    listed = httpx.get(f"{service.url}/v1/environments").json()
    names = {env["name"] for env in listed["environments"]}
    assert {"openenv/guess", "openenv/drift"} <= names
    guess = httpx.get(f"{service.url}/v1/environments/openenv/guess").json()
    assert guess["kind"] == "multi_turn"
    assert [c["name"] for c in guess["reward_components"]] == ["reward"]
    assert "GuessAction" in guess["description"]
    assert guess["config_schema"]["properties"]["train_size"]["default"] == 10_000


def test_a_game_is_deterministic_and_identical_across_a_group(service: ServiceProcess) -> None:
    first, second = create(service, seed=7), create(service, seed=7)
    assert first["observation"] == second["observation"]
    assert halving(service, first["id"]) == halving(service, second["id"])
    assert record(service, first["id"])["messages"] == record(service, second["id"])["messages"]
    group = httpx.post(
        f"{service.url}/v1/episodes", json={"env": "openenv/guess", "n": 3, "example": 4}
    )
    assert group.status_code == 201, group.text
    members = group.json()["episodes"]
    games = [(record(service, e["id"])["messages"], halving(service, e["id"])) for e in members]
    assert all(game == games[0] for game in games)
    other = create(service, example=5)
    assert halving(service, other["id"]) != games[0][1]  # another example, another secret


def test_an_invalid_action_is_said_and_counted_without_stepping(service: ServiceProcess) -> None:
    episode = create(service, seed=3)
    answer = step(service, episode["id"], 0, '{"guess": "fifty"}')
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["done"] is False and body["reward"] == 0.0
    assert body["info"] == {"steps": 0, "invalid_actions": 1, "done": False}
    assert body["observation"][0]["content"].startswith("Not an action of GuessAction (guess)")
    deep = step(service, episode["id"], 1, "[" * 50_000)  # past the JSON parser's depth
    assert deep.status_code == 200 and deep.json()["observation"][0]["content"] == (
        "Not an action: reply with a JSON object of GuessAction (guess)."
    )
    played = halving(service, episode["id"], turn=2)
    score = httpx.get(f"{service.url}/v1/episodes/{episode['id']}/score").json()
    assert score["metrics"] == {"steps": len(played), "invalid_actions": 2}
    assert score["done"] is True and score["total"] == 1.0


def test_the_rewards_are_openenv_s_own(python: Path, service: ServiceProcess) -> None:
    """OpenEnv's client plays the same seed on OpenEnv's own server of the class and on
    Wander's OpenEnv surface of the hosted one: the same guesses, the same rewards."""
    own = ServiceProcess(
        {"PYTHONPATH": str(ROOT)}, ("tests.openenv_envs:app",), "/health",
        python=str(python), cwd=str(ROOT), module="uvicorn",
    ).start()  # fmt: skip
    try:
        client = Client(python, [
            ["guess", own.url, {"seed": 11}, False],
            ["guess", f"{service.url}/openenv/openenv/guess", {"seed": 11}, True],
        ])  # fmt: skip
        theirs, ours = client.result("guess"), client.result("guess")
    finally:
        own.stop()
    assert ours["guesses"] == theirs["guesses"]
    assert ours["rewards"] == theirs["rewards"]
    assert theirs["rewards"][-1] == 1.0
    score = httpx.get(f"{service.url}/v1/episodes/{ours['metadata']['episode_id']}/score")
    assert score.json()["total"] == sum(theirs["rewards"])


def test_a_game_begun_on_a_killed_service_ends_on_another_as_uninterrupted(
    python: Path, shared: dict[str, str], service: ServiceProcess
) -> None:
    reference = create(service, example=2)
    guesses = halving(service, reference["id"])
    assert len(guesses) > 2
    first = serve(python, shared)
    try:
        episode = create(first, example=2)
        for turn, number in enumerate(guesses[:2]):
            observed(step(first, episode["id"], turn, json.dumps({"guess": number})))
        assert first.process is not None
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(30)
    finally:
        first.stop()
    for turn, number in enumerate(guesses[2:], start=2):
        observed(step(service, episode["id"], turn, json.dumps({"guess": number})))
    resumed, expected = record(service, episode["id"]), record(service, reference["id"])
    assert resumed["messages"] == expected["messages"]
    assert resumed["step_rewards"] == expected["step_rewards"]
    assert resumed["score"]["total"] == expected["score"]["total"] == 1.0
    assert resumed["done"] is True


def test_an_environment_that_replays_differently_fails_its_episode(
    service: ServiceProcess,
) -> None:
    """Live in its worker, the drifting environment goes on; once its worker has been
    given to episodes stepped since (``LIVE_EPISODES``), its next step replays the
    episode, and the replay tells."""
    episode = create(service, "openenv/drift", seed=1)
    assert step(service, episode["id"], 0, "hello").status_code == 200
    assert step(service, episode["id"], 1, "again").status_code == 200
    for seed in range(LIVE_EPISODES):
        observed(step(service, create(service, seed=seed)["id"], 0, '{"guess": 50}'))
    second = step(service, episode["id"], 2, "and again")
    assert second.status_code == 422, second.text
    error = second.json()["error"]
    assert error["code"] == "env_nondeterministic"
    assert error["details"] == {"turn": 1}
    assert "turn 1" in error["message"]
    again = step(service, episode["id"], 2, "and again")
    assert again.json()["error"]["code"] == "env_nondeterministic"  # wherever it goes


def test_an_episode_stays_live_in_its_worker_between_steps(service: ServiceProcess) -> None:
    """An episode created alone is live in its create's worker, kept for it; every step
    continues it there. A group's members share their create's worker, so each one's
    first step replays the reset."""
    before = hosted_steps(service, "openenv/guess")
    guesses = halving(service, create(service, seed=99)["id"])
    after = hosted_steps(service, "openenv/guess")
    assert len(guesses) >= 3
    assert after.get("replayed", 0) == before.get("replayed", 0)
    assert after["live"] - before.get("live", 0) == len(guesses)
    group = create(service, seed=98, n=2)
    assert step(service, group["id"], 0, '{"guess": 50}').status_code == 200
    assert hosted_steps(service, "openenv/guess")["replayed"] - after.get("replayed", 0) == 1


def test_openenv_s_own_template_is_hosted_with_the_rewards_of_openenv_s_server(
    python: Path, generated: Path, service: ServiceProcess
) -> None:
    """The echo environment ``openenv init`` writes, unchanged: its one text field takes
    the reply as it is, and OpenEnv's client gets the rewards and observations OpenEnv's
    own server of it gives."""
    own = ServiceProcess(
        {"PYTHONPATH": str(generated)}, ("echo_probe.server.app:app",), "/health",
        python=str(python), cwd=str(generated), module="uvicorn",
    ).start()  # fmt: skip
    said = ["Hi", "Hello there, echo", ""]
    try:
        client = Client(python, [
            ["actions", own.url, {"seed": 5}, [{"message": text} for text in said]],
            ["actions", f"{service.url}/openenv/openenv/echo", {"seed": 5},
             [{"content": text} for text in said]],
        ])  # fmt: skip
        theirs, ours = client.result("actions"), client.result("actions")
    finally:
        own.stop()
    assert [s["reward"] for s in ours["steps"]] == [s["reward"] for s in theirs["steps"]]
    assert [s["reward"] for s in theirs["steps"]] == [0.2, 1.0, 0.0]
    for mine, their in zip(ours["steps"], theirs["steps"], strict=True):
        echoed = json.loads(mine["observation"]["messages"][-1]["content"])
        assert echoed == {**their["observation"], "metadata": their["metadata"]}


def test_grpo_trains_two_steps_on_a_hosted_environment(
    service: ServiceProcess, tmp_path: Path
) -> None:
    """`wander train grpo` with `env = "openenv/guess"`: the tiny model's rollouts are
    played on the hosted environment like any other's (its replies are not GuessActions:
    each is an invalid step, said and counted, until the completion budget ends it)."""
    command = train_command(
        tmp_path / "grpo-hosted.toml", service.url, tmp_path, 2, env="openenv/guess",
        save_strategy="no", use_cpu=True,
    )  # fmt: skip
    trained = CliRunner(env={"COLUMNS": "200"}).invoke(cli, command)
    assert trained.exit_code == 0, trained.output
    with WanderClient(service.url) as client:
        wait_until(
            lambda: any(r.run == "grpo-hosted" and r.episodes >= 16 for r in client.runs().runs),
            "the hosted run's 16 episodes archived",
        )
        page = client.episodes("grpo-hosted", limit=100)
    assert page.total == 16 and {e.env for e in page.episodes} == {"openenv/guess"}
    assert all(e.turn >= 1 for e in page.episodes)
