"""Everything that calls the service sends its key: both clients, the
evaluation runner, every CLI command, the trainer and the load generator. Against
``tests/keyed.py``'s service, which refuses any request without the key, a command that
works sent it with every request it made."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bench.loadgen import run_load
from tests.keyed import KEY, keyed_service
from wander.cli import app
from wander.client import AsyncWanderClient, Unauthorized, WanderClient
from wander.client.evaluation import evaluate
from wander.client.policies import RandomPolicy
from wander.testing import ServiceProcess
from wander.trainer.config import GRPORunConfig

ARCHIVED_RUN = "keyed"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """The keyed service, its archive holding one finished episode of ``ARCHIVED_RUN``."""
    process = keyed_service(tmp_path_factory.mktemp("keyed"))
    with WanderClient(process.url, KEY) as wander:
        [episode] = wander.create("tictactoe", run=ARCHIVED_RUN)
        episode.delete()
    wait_archived(process.url, ARCHIVED_RUN, 1)
    yield process
    process.stop()


def wait_archived(url: str, run: str, episodes: int) -> None:
    """Until the archive, written behind the episodes, holds ``episodes`` of ``run``."""
    deadline = time.monotonic() + 30
    with WanderClient(url, KEY) as wander:
        while not any(r.run == run and r.episodes == episodes for r in wander.runs().runs):
            assert time.monotonic() < deadline, f"{run} never reached {episodes} archived"
            time.sleep(0.1)


@pytest.fixture(autouse=True)
def no_key_around(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key in the developer's environment must not make these tests pass."""
    monkeypatch.delenv("WANDER_API_KEY", raising=False)


@pytest.mark.parametrize(
    ("argument", "environment", "sent"),
    [
        ("wdr_a", None, "Bearer wdr_a"),
        (None, "wdr_b", "Bearer wdr_b"),
        ("wdr_a", "wdr_b", "Bearer wdr_a"),  # the argument wins
        (None, None, None),  # an open service: no header at all
    ],
)
async def test_both_clients_send_the_key_as_a_bearer_token(
    argument: str | None,
    environment: str | None,
    sent: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if environment is not None:
        monkeypatch.setenv("WANDER_API_KEY", environment)
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"environments": []})

    transport = httpx.MockTransport(answer)
    with WanderClient("http://t", argument, transport=transport) as wander:
        wander.environments()
    async with AsyncWanderClient("http://t", argument, transport=transport) as awander:
        await awander.environments()
    assert seen == [sent, sent]


async def test_the_evaluation_runner_plays_with_its_clients_key(keyed: ServiceProcess) -> None:
    async with AsyncWanderClient(keyed.url, KEY) as wander:
        done = await evaluate(
            wander, "tictactoe", RandomPolicy(seed=0), examples=2, rollouts=2, progress=False
        )
    assert (done.summary.episodes, done.summary.errors) == (4, 0)
    async with AsyncWanderClient(keyed.url) as keyless:
        with pytest.raises(Unauthorized):
            await evaluate(keyless, "tictactoe", RandomPolicy(seed=0), examples=1, progress=False)


SERVICE_COMMANDS = [
    ["envs"],
    ["eval", "tictactoe", "--policy", "random", "-n", "1"],
    ["play", "--config", '{"max_turns": 1}'],
    ["runs"],
    ["export", ARCHIVED_RUN, "-o", "export.jsonl"],
    ["train", "warmup-data", "-o", "warmup.jsonl", "-n", "1"],
    ["archive", "dead-letters", "list"],
    ["archive", "dead-letters", "retry", "--all"],
    ["archive", "dead-letters", "drop", "--all", "--yes"],
]
"""Every command that calls the service."""


@pytest.mark.parametrize("command", SERVICE_COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_every_command_sends_the_key_from_its_flag_or_the_environment(
    command: list[str], keyed: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = [*command, "--url", keyed.url]
    keyless = runner.invoke(app, args, input="4\n")
    assert keyless.exit_code == 2, keyless.output
    assert "401 unauthorized" in keyless.output
    assert "--api-key or WANDER_API_KEY" in keyless.output
    flagged = runner.invoke(
        app, [*args, "--api-key", KEY], input="4\n", env={"WANDER_API_KEY": "wdr_wrong"}
    )
    assert flagged.exit_code == 0, flagged.output  # the flag wins over the environment
    from_environment = runner.invoke(app, args, input="4\n", env={"WANDER_API_KEY": KEY})
    assert from_environment.exit_code == 0, from_environment.output


@pytest.mark.parametrize("mode", ["single", "batch"])
async def test_the_load_generator_sends_its_key(keyed: ServiceProcess, mode: str) -> None:
    played = await run_load(keyed.url, 2, 0.5, mode, 4, "random", api_key=KEY)
    assert played.errors == 0 and played.steps > 0
    refused = await run_load(keyed.url, 2, 0.5, mode, 4, "random")
    assert refused.errors > 0 and refused.steps == 0


async def test_the_load_generators_websocket_sessions_send_its_key(keyed: ServiceProcess) -> None:
    """The key goes in the WebSocket handshake, where a browser-free client can put it."""
    url = f"{keyed.url}/openenv/tictactoe"
    played = await run_load(url, 2, 0.5, "ws", 1, "random", api_key=KEY)
    assert played.errors == 0 and played.episodes >= 2
    refused = await run_load(url, 2, 0.5, "ws", 1, "random")
    assert refused.errors == 2 and refused.steps == 0  # each session's handshake: 401


def test_the_trainers_key_never_shows(tmp_path: Path) -> None:
    """Not in a repr (a traceback, a log line), a dump or the saved TRL arguments."""
    run = GRPORunConfig(api_key="wdr_s3cret")
    assert "wdr_s3cret" not in f"{run!r} {run} {run.model_dump()} {run.model_dump_json()}"


def test_the_trainer_plays_with_the_key_of_its_flag_else_its_file(
    keyed: ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    with GRPORunConfig(url=keyed.url, api_key=KEY).client() as wander:
        assert wander.environment("tictactoe").name == "tictactoe"
    wrong = GRPORunConfig(url=keyed.url, api_key="wdr_wrong")
    with wrong.client(api_key=KEY) as wander:
        assert wander.environment("tictactoe").name == "tictactoe"
    with wrong.client() as wander, pytest.raises(Unauthorized):
        wander.environments()
    monkeypatch.setenv("WANDER_API_KEY", KEY)
    with GRPORunConfig(url=keyed.url).client() as wander:  # none in the file
        assert wander.environment("tictactoe").name == "tictactoe"


TRAINING = """
model = "tiny"
env = "tictactoe"
examples = 2
run = "keyed-grpo"
output_dir = "{output}"
max_completion_length = 16
{key}
[sampling]
max_tokens_per_turn = 8
[grpo]
num_generations = 2
generation_batch_size = 4
per_device_train_batch_size = 4
max_steps = 1
save_strategy = "no"
"""


def test_wander_train_grpo_plays_every_rollout_with_the_key(
    keyed: ServiceProcess, tmp_path: Path
) -> None:
    """``--api-key`` reaches every request of the run (a rollout without it would be
    refused), and takes precedence over the file's; the file's never lands in the
    output or the saved run."""
    output = tmp_path / "out"
    config = tmp_path / "run.toml"
    runner = CliRunner(env={"COLUMNS": "200"})
    command = ["train", "grpo", "--config", str(config), "--url", keyed.url]
    config.write_text(TRAINING.format(output=output, key=""))
    refused = runner.invoke(app, command)
    assert refused.exit_code == 2 and "401 unauthorized" in refused.output
    config.write_text(TRAINING.format(output=output, key='api_key = "wdr_in_the_file"'))
    trained = runner.invoke(app, [*command, "--api-key", KEY])
    assert trained.exit_code == 0, trained.output
    wait_archived(keyed.url, "keyed-grpo", 4)  # one step: 2 examples x 2 generations
    saved = [path.read_bytes() for path in output.rglob("*") if path.is_file()]
    assert saved and not any(b"wdr_in_the_file" in data for data in saved)
    assert "wdr_in_the_file" not in trained.output and KEY not in trained.output
