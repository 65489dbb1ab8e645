"""The archive database on SQLite and PostgreSQL: idempotent writes, summaries, filters."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from tests.records import tictactoe_record
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.migrations import downgrade
from wander.service.errors import DatabaseUnavailable, RunNotFound
from wander.testing import free_port

# 10 done games of run-a: 4 wins (one with an invalid move), 3 draws, 3 losses (two
# with invalid moves), plus one aborted game, one game of another run, one unlabelled.
OUTCOMES = ["win", "win", "draw", "loss", "win", "draw", "loss", "win", "draw", "loss"]
INVALID = {1: 1, 3: 2, 6: 1}


@pytest.fixture
def archive(database_url: str) -> Archive:
    archive = Archive(database_url)
    records = [
        tictactoe_record(i, outcome, invalid_moves=INVALID.get(i, 0))
        for i, outcome in enumerate(OUTCOMES)
    ]
    records += [
        tictactoe_record(10, None, status="aborted", formatted=0.0),
        tictactoe_record(11, "win", run="run-b"),
        tictactoe_record(12, "win", run=None),
    ]
    archive.write(records)
    yield archive
    archive.dispose()


def test_writing_twice_keeps_one_row(archive: Archive) -> None:
    archive.write([tictactoe_record(0, "win"), tictactoe_record(0, "win")])
    page = archive.episodes("run-a", EpisodeFilter(), limit=1000, offset=0)
    assert page.total == 11
    assert [ep.id for ep in page.episodes] == [f"ep_{i:04d}" for i in range(11)]


def test_a_record_round_trips(archive: Archive) -> None:
    original = tictactoe_record(3, "loss", invalid_moves=2)
    [stored] = archive.episodes("run-a", EpisodeFilter(), limit=1, offset=3).episodes
    assert stored == original


def test_summary_gives_exact_rates(archive: Archive) -> None:
    summary = archive.summary("run-a")
    assert summary.episodes == 11
    assert summary.statuses == {"done": 10, "aborted": 1}
    assert summary.envs == {"tictactoe": 11}
    assert summary.metrics["outcome"].rates == {"win": 0.4, "draw": 0.3, "loss": 0.3}
    invalid = summary.metrics["invalid_moves"]
    assert invalid.nonzero_rate == 0.3
    assert invalid.mean == 0.4 and invalid.max == 2 and invalid.min == 0
    assert summary.metrics["turns"].mean == 1.4
    assert summary.metrics["model_starts"].rates == {"false": 0.5, "true": 0.5}
    totals = [tictactoe_record(i, o, invalid_moves=INVALID.get(i, 0)).score.total
              for i, o in enumerate(OUTCOMES)]  # fmt: skip
    assert summary.reward is not None
    assert math.isclose(summary.reward.mean, statistics.fmean(totals), abs_tol=1e-12)
    assert math.isclose(summary.reward.std, statistics.pstdev(totals), abs_tol=1e-12)
    assert (summary.reward.min, summary.reward.max) == (min(totals), max(totals))
    assert summary.components == pytest.approx({"win": 0.55, "format": 1.0, "invalid_move": -0.03})
    assert summary.first_created_at == tictactoe_record(0, "win").created_at
    assert summary.last_finished_at == tictactoe_record(10, None).finished_at


def test_unknown_run_is_run_not_found(archive: Archive) -> None:
    with pytest.raises(RunNotFound):
        archive.summary("nope")


def test_runs_are_listed(archive: Archive) -> None:
    page = archive.runs(limit=100, offset=0)
    assert (page.total, page.limit, page.offset) == (2, 100, 0)
    run_a, run_b = page.runs
    assert (run_a.run, run_a.episodes, run_a.envs) == ("run-a", 11, ["tictactoe"])
    assert (run_b.run, run_b.episodes) == ("run-b", 1)
    assert run_a.first_created_at == tictactoe_record(0, "win").created_at
    assert run_a.last_finished_at == tictactoe_record(10, None).finished_at
    second = archive.runs(limit=1, offset=1)
    assert second.total == 2 and [run.run for run in second.runs] == ["run-b"]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (EpisodeFilter(outcome=("win",)), [0, 1, 4, 7]),
        (EpisodeFilter(outcome=("win", "draw")), [0, 1, 2, 4, 5, 7, 8]),
        (EpisodeFilter(exclude_outcome=("loss",)), [0, 1, 2, 4, 5, 7, 8, 10]),
        (EpisodeFilter(status="aborted"), [10]),
        (EpisodeFilter(min_reward=1.0), [0, 1, 4, 7]),
        (EpisodeFilter(min_reward=1.1, max_reward=1.2), [0, 4, 7]),
        (EpisodeFilter(max_reward=0.15), [3, 6, 10]),
        (EpisodeFilter(env="other"), []),
    ],
)
def test_filters(archive: Archive, filters: EpisodeFilter, expected: list[int]) -> None:
    page = archive.episodes("run-a", filters, limit=100, offset=0)
    assert [ep.example for ep in page.episodes] == expected
    assert page.total == len(expected)


def test_paging(archive: Archive) -> None:
    pages = [archive.episodes("run-a", EpisodeFilter(), limit=4, offset=o) for o in (0, 4, 8)]
    assert [[ep.example for ep in page.episodes] for page in pages] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10],
    ]  # fmt: skip
    assert {page.total for page in pages} == {11}


def test_transcripts_end_on_the_models_last_message(archive: Archive) -> None:
    lines = list(
        archive.transcripts("run-a", EpisodeFilter(exclude_outcome=("loss",), status="done"))
    )
    assert len(lines) == 7
    for line in lines:
        messages = json.loads(line)["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]


def test_an_unreachable_database_is_database_unavailable() -> None:
    archive = Archive(f"postgresql+psycopg://127.0.0.1:{free_port()}/none")
    with pytest.raises(DatabaseUnavailable):
        archive.ping()
    with pytest.raises(DatabaseUnavailable):
        archive.write([tictactoe_record(0, "win")])
    with pytest.raises(DatabaseUnavailable):
        archive.summary("run-a")


def test_ping_refuses_an_unmigrated_database(archive: Archive) -> None:
    archive.ping()
    downgrade(archive.url, "base")
    with pytest.raises(DatabaseUnavailable, match="wander db upgrade"):
        archive.ping()
