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
    page = archive.episodes("run-a", EpisodeFilter(), tenant=None, limit=1000, offset=0)
    assert page.total == 11
    assert [ep.id for ep in page.episodes] == [f"ep_{i:04d}" for i in range(11)]


def test_a_record_round_trips(archive: Archive) -> None:
    original = tictactoe_record(3, "loss", invalid_moves=2)
    [stored] = archive.episodes("run-a", EpisodeFilter(), tenant=None, limit=1, offset=3).episodes
    assert stored == original


def test_summary_gives_exact_rates(archive: Archive) -> None:
    summary = archive.summary("run-a", tenant=None)
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
        archive.summary("nope", tenant=None)


def test_runs_are_listed(archive: Archive) -> None:
    page = archive.runs(tenant=None, limit=100, offset=0)
    assert (page.total, page.limit, page.offset) == (2, 100, 0)
    run_a, run_b = page.runs
    assert (run_a.run, run_a.episodes, run_a.envs) == ("run-a", 11, ["tictactoe"])
    assert (run_b.run, run_b.episodes) == ("run-b", 1)
    assert run_a.first_created_at == tictactoe_record(0, "win").created_at
    assert run_a.last_finished_at == tictactoe_record(10, None).finished_at
    second = archive.runs(tenant=None, limit=1, offset=1)
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
    page = archive.episodes("run-a", filters, tenant=None, limit=100, offset=0)
    assert [ep.example for ep in page.episodes] == expected
    assert page.total == len(expected)


def test_paging(archive: Archive) -> None:
    pages = [
        archive.episodes("run-a", EpisodeFilter(), tenant=None, limit=4, offset=o)
        for o in (0, 4, 8)
    ]
    assert [[ep.example for ep in page.episodes] for page in pages] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10],
    ]  # fmt: skip
    assert {page.total for page in pages} == {11}


def test_transcripts_end_on_the_models_last_message(archive: Archive) -> None:
    lines = list(
        archive.transcripts(
            "run-a", EpisodeFilter(exclude_outcome=("loss",), status="done"), tenant=None
        )
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
        archive.summary("run-a", tenant=None)


def test_ping_refuses_an_unmigrated_database(archive: Archive) -> None:
    archive.ping()
    downgrade(archive.url, "base")
    with pytest.raises(DatabaseUnavailable, match="wander db upgrade"):
        archive.ping()


# Two tenants with a run named "eval" each, acme's "solo", and an "eval" of no tenant
# (archived before keys, or by an open service).
TENANTED = [
    *(tictactoe_record(i, "win", run="eval", tenant="acme") for i in range(3)),
    *(tictactoe_record(i, "loss", run="eval", tenant="globex") for i in range(10, 12)),
    tictactoe_record(20, "draw", run="solo", tenant="acme"),
    tictactoe_record(21, "draw", run="eval"),
]


@pytest.fixture
def tenanted(database_url: str) -> Archive:
    archive = Archive(database_url)
    archive.write(TENANTED)
    yield archive
    archive.dispose()


def runs_of(archive: Archive, tenant: str | None) -> list[tuple[str, str | None, int]]:
    page = archive.runs(tenant=tenant, limit=100, offset=0)
    assert page.total == len(page.runs)
    return [(run.run, run.tenant, run.episodes) for run in page.runs]


def test_each_tenant_lists_only_its_own_runs(tenanted: Archive) -> None:
    assert runs_of(tenanted, "acme") == [("eval", "acme", 3), ("solo", "acme", 1)]
    assert runs_of(tenanted, "globex") == [("eval", "globex", 2)]
    assert runs_of(tenanted, "initech") == []
    assert runs_of(tenanted, None) == [
        ("eval", "acme", 3), ("eval", "globex", 2), ("solo", "acme", 1), ("eval", None, 1),
    ]  # fmt: skip


def test_a_tenants_run_holds_only_its_own_episodes(tenanted: Archive) -> None:
    acme = tenanted.summary("eval", tenant="acme")
    assert (acme.tenant, acme.episodes, acme.metrics["outcome"].rates) == ("acme", 3, {"win": 1.0})
    globex = tenanted.summary("eval", tenant="globex")
    assert (globex.tenant, globex.episodes) == ("globex", 2)
    assert globex.metrics["outcome"].rates == {"loss": 1.0}
    page = tenanted.episodes("eval", EpisodeFilter(), tenant="globex", limit=100, offset=0)
    assert page.total == 2 and page.episodes == TENANTED[3:5]  # the tenant read back too
    outcome = EpisodeFilter(outcome=("win",))
    assert tenanted.episodes("eval", outcome, tenant="globex", limit=100, offset=0).total == 0
    assert len(list(tenanted.transcripts("eval", EpisodeFilter(), tenant="acme"))) == 3
    tenanted.require_run("eval", tenant="globex")


def test_an_episode_reads_by_id_to_its_tenant_and_to_no_tenant(tenanted: Archive) -> None:
    """What the service answers for a finished episode once the store has let it go."""
    globex = TENANTED[3]
    assert tenanted.episode(globex.id, tenant="globex") == globex
    assert tenanted.episode(globex.id, tenant=None) == globex
    assert tenanted.episode(globex.id, tenant="acme") is None  # as unknown as an unknown id
    assert tenanted.episode("ep_unknown", tenant=None) is None


def test_no_tenant_sees_every_tenants_episodes_of_a_label(tenanted: Archive) -> None:
    summary = tenanted.summary("eval", tenant=None)
    assert (summary.tenant, summary.episodes) == (None, 6)
    assert summary.metrics["outcome"].rates == {"win": 0.5, "loss": 1 / 3, "draw": 1 / 6}
    page = tenanted.episodes("eval", EpisodeFilter(), tenant=None, limit=100, offset=0)
    assert [ep.tenant for ep in page.episodes] == ["acme"] * 3 + ["globex"] * 2 + [None]
    assert len(list(tenanted.transcripts("eval", EpisodeFilter(), tenant=None))) == 6


def test_another_tenants_run_reads_as_an_unknown_run(tenanted: Archive) -> None:
    with pytest.raises(RunNotFound) as unknown:
        tenanted.summary("nope", tenant="globex")
    with pytest.raises(RunNotFound) as foreign:
        tenanted.summary("solo", tenant="globex")
    assert foreign.value.message == unknown.value.message.replace("nope", "solo")
    with pytest.raises(RunNotFound):
        tenanted.require_run("solo", tenant="globex")
    page = tenanted.episodes("solo", EpisodeFilter(), tenant="globex", limit=100, offset=0)
    assert (page.total, page.episodes) == (0, [])
    assert list(tenanted.transcripts("solo", EpisodeFilter(), tenant="globex")) == []


def test_runs_starting_together_are_ordered_by_label_then_tenant(database_url: str) -> None:
    """One order on SQLite and PostgreSQL, episodes of no tenant first: pages never
    repeat nor skip a run."""
    owners = [("eval", "globex"), ("eval", None), ("alpha", "acme"), ("eval", "acme")]
    records = [
        tictactoe_record(i, "win", run=run, tenant=tenant).model_copy(
            update={"created_at": tictactoe_record(0, "win").created_at}
        )
        for i, (run, tenant) in enumerate(owners)
    ]
    archive = Archive(database_url)
    archive.write(records)
    pages = [archive.runs(tenant=None, limit=1, offset=i) for i in range(4)]
    archive.dispose()
    assert {page.total for page in pages} == {4}
    assert [(run.run, run.tenant) for page in pages for run in page.runs] == [
        ("alpha", "acme"), ("eval", None), ("eval", "acme"), ("eval", "globex"),
    ]  # fmt: skip
