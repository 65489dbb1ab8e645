"""A generation backend as an evaluation policy: batched, exact, and failing loudly."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp
from typer.testing import CliRunner

from tests.agents import ScriptedBackend
from wander.cli import app as cli
from wander.client import AsyncWanderClient, Message
from wander.client.evaluation import evaluate
from wander.testing import ServiceProcess
from wander.trainer.backends import Generation
from wander.trainer.policy import BackendPolicy
from wander.trainer.tiny import build_model, build_tokenizer

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


@pytest.fixture
def store_kind() -> str:
    """These tests play through the ASGI app on the real Redis store."""
    return "redis"


def asgi_client(app: ASGIApp) -> AsyncWanderClient:
    return AsyncWanderClient("http://wander.test", transport=httpx.ASGITransport(app=app))


async def test_concurrent_games_are_generated_together_and_scored_exactly(app: ASGIApp) -> None:
    tokenizer = build_tokenizer()
    backend = ScriptedBackend(tokenizer)
    async with asgi_client(app) as wander:
        result = await evaluate(
            wander, "tictactoe", BackendPolicy(backend, tokenizer, gather_seconds=0.1), examples=8,
            config=OPTIMAL, concurrency=8, progress=False,
        )  # fmt: skip

    assert result.summary.errors == 0
    # Minimax against minimax: every game a draw, with well-formed, valid moves.
    assert [r.metrics["outcome"] for r in result.results] == ["draw"] * 8
    assert all(r.components["format"] == 1.0 for r in result.results)
    assert sum(backend.batch_sizes) == len(backend.generated)
    assert backend.batch_sizes[0] == 8  # the opening moves of all eight games, one batch


class BrokenBackend:
    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        raise RuntimeError("out of memory")


async def test_a_failing_backend_fails_every_waiting_game(app: ASGIApp) -> None:
    policy = BackendPolicy(BrokenBackend(), build_tokenizer())
    async with asgi_client(app) as wander:
        result = await evaluate(
            wander, "tictactoe", policy, examples=4, concurrency=4, progress=False
        )

    assert result.summary.errors == 4
    assert all("out of memory" in (r.error or "") for r in result.results)


class NulBackend:
    """Samples the NUL character, as an untrained model does now and then."""

    def __init__(self, tokenizer: Any) -> None:
        self.answer = tokenizer.encode("<move>\x00</move>", add_special_tokens=False)

    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        return [Generation(self.answer, None) for _ in prompts]


async def test_a_sampled_nul_is_played_as_an_invalid_move_not_a_failed_game(app: ASGIApp) -> None:
    policy = BackendPolicy(NulBackend(build_tokenizer()), build_tokenizer())
    async with asgi_client(app) as wander:
        result = await evaluate(
            wander, "tictactoe", policy, examples=2, config={"max_turns": 2}, concurrency=2,
            progress=False,
        )  # fmt: skip

    assert result.summary.errors == 0
    assert [r.metrics["invalid_moves"] for r in result.results] == [2, 2]
    assert [r.metrics["outcome"] for r in result.results] == ["loss", "loss"]


def test_wander_eval_plays_a_saved_checkpoint(live: ServiceProcess, tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    args = ["eval", "tictactoe", "--policy", "transformers", "--model", str(tmp_path / "model"),
            "--max-tokens", "4", "-n", "3", "--config", json.dumps(OPTIMAL), "--url", live.url,
            "--output", str(tmp_path / "r.jsonl")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "120"})

    assert result.exit_code == 0, result.output
    assert "3 episodes scored, 0 errors" in result.output
    # An untrained model writes no move: every game runs out of turns.
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [row["metrics"]["outcome"] for row in rows] == ["loss"] * 3
    assert all(row["metrics"]["invalid_moves"] == 8 for row in rows)


def test_wander_eval_transformers_needs_a_model(live: ServiceProcess) -> None:
    result = CliRunner().invoke(cli, ["eval", "tictactoe", "--policy", "transformers"])
    assert result.exit_code == 2 and "checkpoint directory" in result.output


class RecordingBackend:
    """Echoes nothing, after ``seconds``, and keeps the size of each batch it was given."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.batch_sizes: list[int] = []

    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        time.sleep(self.seconds)
        self.batch_sizes.append(len(prompts))
        return [Generation([], []) for _ in prompts]


async def _ask_staggered(policy: BackendPolicy, games: int, gap: float) -> None:
    async def ask(delay: float) -> None:
        await asyncio.sleep(delay)
        await policy.act([Message(role="user", content="Your move.")])

    await asyncio.gather(*(ask(i * gap) for i in range(games)))


async def test_games_asking_a_few_ms_apart_are_generated_together() -> None:
    # Six games ask 50 ms apart, 250 ms from first to last: a lull of 200 ms
    # never comes, so they are one batch (a window from the first would split them).
    backend = RecordingBackend()
    policy = BackendPolicy(backend, build_tokenizer(), gather_seconds=0.2, max_wait_seconds=5)
    await _ask_staggered(policy, games=6, gap=0.05)
    assert backend.batch_sizes == [6]


async def test_after_a_slow_generation_the_policy_waits_longer_for_stragglers() -> None:
    # A generation took 1 s, so a lull of 10 ms is too short a wait: a game left for
    # the next batch would cost another second. Six games asking 50 ms apart are one
    # batch (with a fixed 10 ms lull they were six).
    backend = RecordingBackend(seconds=1.0)
    policy = BackendPolicy(backend, build_tokenizer(), gather_seconds=0.01, max_wait_seconds=0.1)
    await _ask_staggered(policy, games=1, gap=0)
    await _ask_staggered(policy, games=6, gap=0.05)
    assert backend.batch_sizes == [1, 6]


async def test_the_event_loop_stays_free_while_a_batch_is_generated() -> None:
    # The games' requests to the service go on during a generation; one that held
    # the loop for seconds would run their timeouts out.
    policy = BackendPolicy(RecordingBackend(seconds=1.0), build_tokenizer())
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await policy.act([Message(role="user", content="Your move.")])
    ticker.cancel()
    assert ticks >= 15


async def test_a_steady_stream_of_requests_is_cut_at_max_wait() -> None:
    backend = RecordingBackend()
    policy = BackendPolicy(backend, build_tokenizer(), gather_seconds=1, max_wait_seconds=0.25)
    await _ask_staggered(policy, games=8, gap=0.1)
    assert len(backend.batch_sizes) >= 2 and sum(backend.batch_sizes) == 8
