"""A generation backend as an evaluation policy: batched, exact, and failing loudly."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import ASGIApp

from client import AsyncWanderClient
from client.evaluation import evaluate
from tests.agents import ScriptedBackend
from trainer.backends import Generation
from trainer.policy import BackendPolicy
from trainer.tiny import build_tokenizer

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


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


@pytest.fixture
def store_kind() -> str:
    return "redis"
