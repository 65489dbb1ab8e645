"""OpenEnv's real clients against ``wander serve``: the ``openenv`` package from PyPI, in a
venv of its own (tests/interop.py), driving tests/openenv_client.py.

OpenEnv 0.10's ``GenericEnvClient`` plays whole tic-tac-toe games (sync and async), a
reverse_text episode and a sql episode through its tool actions, and OpenEnv's own
``validate`` passes the base URL; a game whose service is killed half-way is finished
through a second service sharing the Redis, reattached by ``?episode_id=`` on the
client's base URL, and ends exactly as the same game played without a break. The 0.4.1
client, the one Verifiers 0.4 pins, plays a game too. Every episode's rewards, as the
client received them, add up to its score read over REST.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from tests.interop import interop_venv
from wander.testing import ServiceProcess

CLIENT = Path(__file__).with_name("openenv_client.py")
TIMEOUT = 300
pytestmark = pytest.mark.timeout(900)  # a first run builds the client's venv: minutes


@pytest.fixture
def services(redis_url: str, redis_prefix: str, sqlite_url: str) -> Iterator[list[ServiceProcess]]:
    """Two services sharing one Redis and one archive, as two replicas would."""
    env = {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": redis_prefix,
           "WANDER_DATABASE_URL": sqlite_url}  # fmt: skip
    started = [ServiceProcess(env).start(), ServiceProcess(env).start()]
    yield started
    for service in started:
        service.stop()


def score(service: ServiceProcess, episode_id: str) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/v1/episodes/{episode_id}/score")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_rewards_add_up(service: ServiceProcess, steps: list[dict[str, Any]]) -> None:
    """The client's step rewards sum to the episode's score, and the last step ended it."""
    episode_id = steps[-1]["metadata"]["episode_id"]
    assert steps[-1]["done"] is True
    final = score(service, episode_id)
    assert sum(step["reward"] for step in steps) == pytest.approx(final["total"], abs=1e-9)


class Client:
    """tests/openenv_client.py running ``tasks`` in ``python``; its JSON lines, read one
    by one."""

    def __init__(self, python: Path, tasks: list[list[Any]]) -> None:
        self.process = subprocess.Popen(
            [python, CLIENT, json.dumps(tasks)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def line(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            self.process.wait(TIMEOUT)
            stderr = self.process.stderr.read() if self.process.stderr else ""
            pytest.fail(f"the OpenEnv client ended early ({self.process.returncode}):\n{stderr}")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def result(self, task: str) -> Any:
        line = self.line()
        assert line["task"] == task
        return line["result"]

    def resume(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self) -> None:
        assert self.process.wait(TIMEOUT) == 0, (
            self.process.stderr.read() if self.process.stderr else ""
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def without_ids(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps with the episode's id taken out (two episodes of one game differ in that only)."""

    def strip(metadata: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in metadata.items() if key != "episode_id"}

    return [
        {**step, "metadata": strip(step["metadata"]),
         "observation": {**step["observation"], "metadata": strip(step["observation"]["metadata"])}}
        for step in steps
    ]  # fmt: skip


def test_openenv_010_client_plays_every_kind_of_environment(
    services: list[ServiceProcess],
) -> None:
    python = interop_venv("openenv010")
    first, second = services
    tictactoe = f"{first.url}/openenv/tictactoe"
    client = Client(python, [
        ["validate", tictactoe], ["games", tictactoe, 4], ["reverse_text", first.url],
        ["sql", first.url], ["drop", first.url, second.url],
    ])  # fmt: skip
    try:
        report = client.result("validate")
        failed = [c for c in report["criteria"] if c["required"] and not c["passed"]]
        assert report["passed"], failed

        games = client.result("games")["games"]
        for game in games:
            assert_rewards_add_up(first, game["steps"])
            turns = [step["metadata"]["turn"] for step in game["steps"]]
            assert turns == list(range(1, len(turns) + 1))
        penalties = [
            step["reward"] for game in games for step in game["steps"] if step["reward"] < 0
        ]
        assert penalties  # the invalid moves were played, and cost what they cost

        reverse = client.result("reverse_text")
        assert_rewards_add_up(first, reverse["steps"])
        assert score(first, reverse["steps"][0]["metadata"]["episode_id"])["total"] == 1.2

        sql = client.result("sql")
        assert [tool["name"] for tool in sql["tools"]["observation"]["tools"]] == [
            "list_tables", "describe_table", "run_sql"
        ]  # fmt: skip
        tables, count, _ = sql["steps"]
        assert tables["observation"]["tool_name"] == "list_tables"
        assert "customers" in tables["observation"]["result"]
        assert count["observation"]["result"].strip()
        assert_rewards_add_up(first, sql["steps"])

        dropped = client.line()["dropped"]
        first.kill()  # mid-game, the client's connection with it
        client.resume()
        drop = client.result("drop")
        assert drop["episode_id"] == dropped
        reference = drop["reference"]
        assert len(reference["steps"]) > 2
        assert without_ids(drop["steps"]) == without_ids(reference["steps"])
        assert_rewards_add_up(second, drop["steps"])
        resumed, uninterrupted = score(second, dropped), score(second, reference["episode_id"])
        assert {**resumed, "episode_id": None} == {**uninterrupted, "episode_id": None}
        client.finish()
    finally:
        client.kill()


def test_openenv_041_client_plays_a_game(live: ServiceProcess) -> None:
    """The client of openenv 0.4.1, the version Verifiers 0.4's OpenEnvTaskset runs."""
    python = interop_venv("openenv041")
    client = Client(python, [["games", f"{live.url}/openenv/tictactoe", 2]])
    try:
        for game in client.result("games")["games"]:
            assert_rewards_add_up(live, game["steps"])
        client.finish()
    finally:
        client.kill()
