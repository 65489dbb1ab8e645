"""The Python client against a live service (sync) and over ASGI on both stores (async)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from starlette.types import ASGIApp

from tests.agents import answer, perfect_agent
from tests.helpers import service, write_archive
from tests.records import many_runs, oldest_first
from wander.client import (
    AsyncWanderClient,
    EnvNotFound,
    EpisodeDone,
    EpisodeNotDone,
    EpisodeNotFound,
    InvalidRequest,
    PayloadTooLarge,
    RunNotFound,
    StepError,
    StepResult,
    TurnMismatch,
    WanderClient,
)
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import ServiceProcess

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


def board(episode: object) -> str:
    return episode.info["board"]  # type: ignore[attr-defined, no-any-return]


def test_the_blocking_client_covers_the_api(live: ServiceProcess) -> None:
    with WanderClient(live.url) as wander:
        assert {"tictactoe", "sql"} <= {env.name for env in wander.environments()}
        info = wander.environment("tictactoe")
        assert [c.name for c in info.reward_components] == ["win", "format", "invalid_move"]

        group = wander.create("tictactoe", config=OPTIMAL, example=3, n=2, run="client")
        assert len(group) == 2 and group[0].group == group[1].group
        episode = group[0]
        while not episode.done:
            result = episode.step(perfect_agent(board(episode)))
            assert isinstance(result, StepResult)
        assert episode.turn == len(episode.rewards) and episode.info["winner"] == "draw"
        assert [m.role for m in episode.messages][:2] == ["system", "user"]
        assert len(episode.messages) == 2 + 2 * episode.turn
        score = episode.score()
        assert score.done and score.metrics["outcome"] == "draw"
        assert episode.total_reward == pytest.approx(score.total)
        record = episode.record()
        assert record.status == "done" and record.messages == episode.messages

        other = group[1]
        batch = wander.step_many(
            [
                {"episode_id": other.id, "action": answer(4), "turn": 0},
                {"episode_id": "ep_missing", "action": answer(4)},
            ]
        )
        assert isinstance(batch[0], StepResult) and batch[0].turn == 1
        assert isinstance(batch[1], StepError) and batch[1].error.code == "episode_not_found"
        other.delete()
        assert wander.episode(other.id).status == "aborted"

        for _ in range(50):  # the archive writes behind
            if any(run.run == "client" and run.episodes == 2 for run in wander.runs().runs):
                break
            time.sleep(0.1)
        summary = wander.run("client")
        assert summary.statuses == {"done": 1, "aborted": 1}
        page = wander.episodes("client", status="done")
        assert [ep.id for ep in page.episodes] == [episode.id]
        exported = wander.export("client", exclude_outcome=["loss"], status="done")
        assert len(exported) == 1 and exported[0]["messages"][-1]["role"] == "assistant"


def test_errors_are_typed(live: ServiceProcess) -> None:
    with WanderClient(live.url) as wander:
        with pytest.raises(EnvNotFound):
            wander.create("chess")
        with pytest.raises(EpisodeNotFound):
            wander.step("ep_missing", "x", turn=0)
        with pytest.raises(RunNotFound):
            wander.run("never")
        with pytest.raises(InvalidRequest) as invalid:
            wander.create("tictactoe", config={"max_turns": 0})
        assert invalid.value.details[0]["loc"] == ["body", "config", "max_turns"]
        [episode] = wander.create("tictactoe", config={"max_turns": 2}, example=0)
        with pytest.raises(EpisodeNotDone):
            episode.score()
        with pytest.raises(PayloadTooLarge):
            episode.step("x" * 70_000)
        episode.step("pass")
        with pytest.raises(TurnMismatch) as mismatch:
            wander.step(episode.id, "other", turn=0)
        assert mismatch.value.details == {"turn": 1} and mismatch.value.status == 409
        episode.step("pass")
        assert episode.done
        with pytest.raises(EpisodeDone):
            wander.step(episode.id, "again", turn=2)


def test_the_blocking_client_pages_through_the_runs(runs_service: ServiceProcess) -> None:
    with WanderClient(runs_service.url) as wander:
        pages = [wander.runs(limit=4, offset=offset) for offset in (0, 4, 8)]
        with pytest.raises(InvalidRequest) as invalid:
            wander.runs(offset=2**63)
    assert [(page.total, page.limit, page.offset) for page in pages] == [
        (10, 4, o) for o in (0, 4, 8)
    ]
    assert [run.run for page in pages for run in page.runs] == oldest_first(many_runs(10))
    assert invalid.value.details[0]["loc"] == ["query", "offset"]


async def test_the_async_client_pages_through_the_runs(sqlite_url: str) -> None:
    records = many_runs(10)
    upgrade(sqlite_url)
    write_archive(sqlite_url, records)
    async with service(Settings(redis_url=None, database_url=sqlite_url)) as (app, _):
        transport = httpx.ASGITransport(app=app)
        async with AsyncWanderClient("http://wander.test", transport=transport) as wander:
            pages = [await wander.runs(limit=3, offset=offset) for offset in range(0, 12, 3)]
            with pytest.raises(InvalidRequest) as invalid:
                await wander.runs(limit=1001)
    assert [len(page.runs) for page in pages] == [3, 3, 3, 1]
    assert {page.total for page in pages} == {10}
    assert [run.run for page in pages for run in page.runs] == oldest_first(records)
    assert invalid.value.details[0]["loc"] == ["query", "limit"]


async def test_the_async_client_plays_on_both_stores(app: ASGIApp) -> None:
    transport = httpx.ASGITransport(app=app)
    async with AsyncWanderClient("http://wander.test", transport=transport) as wander:
        [episode] = await wander.create("tictactoe", config=OPTIMAL, example=5)
        while not episode.done:
            await episode.step(perfect_agent(board(episode)))
        assert (await episode.score()).metrics["outcome"] == "draw"
        assert (await wander.episode(episode.id)).turn == episode.turn
        with pytest.raises(EpisodeNotFound):
            await wander.score("ep_missing")


def test_requests_are_validated_before_they_are_sent(tmp_path: Path) -> None:
    sent = []
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(500))
    with WanderClient("http://nowhere", transport=transport) as wander:
        with pytest.raises(ValueError):
            wander.create("tictactoe", n=0)
        for both_or_neither in [{"ids": ["1-0"], "all": True}, {}, {"ids": []}]:
            with pytest.raises(ValueError, match="either ids or all=True"):
                wander.retry_dead_letters(**both_or_neither)
            with pytest.raises(ValueError, match="either ids or all=True"):
                wander.drop_dead_letters(**both_or_neither)
    assert sent == []
