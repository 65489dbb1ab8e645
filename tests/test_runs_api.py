"""Finished episodes reach the archive and the runs API, on both stores."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.agents import answer, perfect_agent, random_agent
from tests.helpers import create, error_of, play_game, service, step, write_archive
from tests.records import many_runs, oldest_first, tictactoe_record
from wander.client.models import EpisodeRecord
from wander.service.settings import Settings

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}
RANDOM = {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}


async def wait_archived(api: httpx.AsyncClient, run: str, episodes: int) -> dict[str, Any]:
    """The run's summary once it holds ``episodes`` episodes (the archive writes behind)."""
    for _ in range(100):
        response = await api.get(f"/v1/runs/{run}")
        if response.status_code == 200 and response.json()["episodes"] == episodes:
            return dict(response.json())
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run!r} never reached {episodes} archived episodes")


def sloppy_agent(seed: int):  # type: ignore[no-untyped-def]
    """Random moves, one invalid move first."""
    moves = random_agent(seed)
    said = []

    def agent(board: str) -> str:
        said.append(board)
        return answer(9) if len(said) == 1 else moves(board)

    return agent


async def play_known_games(api: httpx.AsyncClient, run: str) -> list[dict[str, Any]]:
    """Twelve finished games of mixed outcomes plus one aborted; returns their live scores."""
    plans = [(OPTIMAL, perfect_agent)] * 4 + [(RANDOM, perfect_agent)] * 4
    plans += [(OPTIMAL, random_agent(i)) for i in range(2)]
    plans += [(OPTIMAL, sloppy_agent(i)) for i in range(2)]
    scores = []
    for example, (config, agent) in enumerate(plans):
        [episode] = await create(api, config=config, example=example, run=run)
        await play_game(api, episode, agent)
        scores.append((await api.get(f"/v1/episodes/{episode['id']}/score")).json())
    [aborted] = await create(api, example=99, run=run)
    await api.delete(f"/v1/episodes/{aborted['id']}")
    return scores


async def test_a_runs_summary_matches_its_games(api: httpx.AsyncClient) -> None:
    scores = await play_known_games(api, "known")
    summary = await wait_archived(api, "known", len(scores) + 1)

    outcomes = Counter(s["metrics"]["outcome"] for s in scores)
    assert summary["statuses"] == {"done": 12, "aborted": 1}
    assert summary["metrics"]["outcome"]["rates"] == {
        outcome: count / 12 for outcome, count in sorted(outcomes.items())
    }
    invalid = [s["metrics"]["invalid_moves"] for s in scores]
    assert summary["metrics"]["invalid_moves"]["nonzero_rate"] == sum(map(bool, invalid)) / 12
    assert summary["metrics"]["turns"]["mean"] == sum(s["metrics"]["turns"] for s in scores) / 12
    totals = [s["total"] for s in scores]
    assert math.isclose(summary["reward"]["mean"], math.fsum(totals) / 12, abs_tol=1e-12)
    assert summary["reward"]["max"] == max(totals) and summary["reward"]["min"] == min(totals)
    runs = (await api.get("/v1/runs")).json()
    assert runs["total"] == 1 and [r["run"] for r in runs["runs"]] == ["known"]
    assert runs["runs"][0]["episodes"] == 13 and runs["runs"][0]["envs"] == ["tictactoe"]


async def test_export_without_losses_has_exactly_the_other_games(api: httpx.AsyncClient) -> None:
    scores = await play_known_games(api, "sft")
    await wait_archived(api, "sft", len(scores) + 1)
    kept = {s["episode_id"] for s in scores if s["metrics"]["outcome"] != "loss"}

    page = (
        await api.get("/v1/runs/sft/episodes", params={"exclude_outcome": "loss", "status": "done"})
    ).json()
    assert page["total"] == len(kept)
    assert {ep["id"] for ep in page["episodes"]} == kept

    response = await api.get(
        "/v1/runs/sft/episodes",
        params={"format": "jsonl", "exclude_outcome": "loss", "status": "done"},
    )
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = response.text.splitlines()
    transcripts = [json.loads(line)["messages"] for line in lines]
    expected = [ep["messages"] for ep in page["episodes"]]
    assert len(transcripts) == len(kept)
    for transcript, messages in zip(transcripts, expected, strict=True):
        roles = [m["role"] for m in transcript]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        assert roles[2:] == ["assistant", "user"] * (len(roles[2:]) // 2) + ["assistant"]
        assert transcript == messages[: len(transcript)]
        assert all(m["content"] for m in transcript)


@asynccontextmanager
async def serving(
    database_url: str, records: list[EpisodeRecord]
) -> AsyncIterator[httpx.AsyncClient]:
    """The service (in-process store) over the archive at ``database_url``, holding ``records``."""
    write_archive(database_url, records)
    async with service(Settings(redis_url=None, database_url=database_url)) as (_, api):
        yield api


@pytest.fixture
async def archived_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The service over an archive on SQLite and on PostgreSQL holding run-a's
    episodes ep_0000 (a win) and ep_0001 (a loss)."""
    async with serving(
        database_url, [tictactoe_record(0, "win"), tictactoe_record(1, "loss")]
    ) as api:
        yield api


async def test_paging_through_the_runs_yields_each_once_in_order(database_url: str) -> None:
    records = many_runs(31)
    async with serving(database_url, records) as api:
        pages = []
        for offset in range(0, 35, 7):
            page = (await api.get("/v1/runs", params={"limit": 7, "offset": offset})).json()
            assert (page["total"], page["limit"], page["offset"]) == (31, 7, offset)
            pages.append(page["runs"])
        everything = (await api.get("/v1/runs")).json()
        last = (await api.get("/v1/runs", params={"offset": 2**63 - 1})).json()
    assert [len(runs) for runs in pages] == [7, 7, 7, 7, 3]
    runs = [run for page in pages for run in page]
    assert [run["run"] for run in runs] == oldest_first(records)
    assert everything == {
        "total": 31, "limit": 100, "offset": 0, "runs": runs, "tenant": None, "unlabelled": 1,
    }  # fmt: skip
    assert Counter({run["run"]: run["episodes"] for run in runs}) == Counter(
        record.run for record in records if record.run is not None
    )
    assert last == {
        "total": 31, "limit": 100, "offset": 2**63 - 1, "runs": [], "tenant": None,
        "unlabelled": 1,
    }  # fmt: skip


async def test_a_service_without_keys_shows_every_tenants_runs(database_url: str) -> None:
    """Two tenants' runs named ``eval`` are two runs, each with its tenant; a caller of
    every tenant (no keys, or an admin) gets one summary of the label's episodes."""
    records = [
        tictactoe_record(0, "win", run="eval", tenant="acme"),
        tictactoe_record(1, "loss", run="eval", tenant="globex"),
        tictactoe_record(2, "draw", run=None, tenant="globex"),
    ]
    async with serving(database_url, records) as api:
        runs = (await api.get("/v1/runs")).json()
        summary = (await api.get("/v1/runs/eval")).json()
        page = (await api.get("/v1/runs/eval/episodes")).json()
    assert (runs["total"], runs["tenant"], runs["unlabelled"]) == (2, None, 1)
    assert [(run["run"], run["tenant"], run["episodes"]) for run in runs["runs"]] == [
        ("eval", "acme", 1), ("eval", "globex", 1),
    ]  # fmt: skip
    assert (summary["run"], summary["tenant"], summary["episodes"]) == ("eval", None, 2)
    assert [episode["tenant"] for episode in page["episodes"]] == ["acme", "globex"]


BAD_PAGES: list[dict[str, Any]] = [
    {"limit": 0}, {"limit": 1001}, {"limit": 2**63}, {"limit": "ten"}, {"offset": -1},
    {"offset": 2**63}, {"offset": 2**64}, {"offset": 10**30}, {"offset": "1e3"},
]  # fmt: skip


async def test_out_of_range_pages_of_runs_are_validation_errors(
    archived_api: httpx.AsyncClient,
) -> None:
    for params in BAD_PAGES:
        response = await archived_api.get("/v1/runs", params=params)
        assert response.status_code == 422, params
        [error] = error_of(response)["details"]
        assert error["loc"] == ["query", next(iter(params))], params


BAD_QUERIES: list[dict[str, Any]] = [
    *BAD_PAGES, {"format": "csv"}, {"status": "active"},
    {"min_reward": "high"}, {"min_reward": "nan"}, {"max_reward": "nan"}, {"min_reward": "inf"},
    {"max_reward": "-inf"}, {"min_reward": "Infinity"}, {"max_reward": "1e400"},
    {"env": "tic\x00tac"}, {"outcome": ["win", "lo\x00ss"]}, {"exclude_outcome": "\x00"},
]  # fmt: skip


@pytest.mark.parametrize("output", ["json", "jsonl"])
async def test_bad_queries_are_validation_errors(
    archived_api: httpx.AsyncClient, output: str
) -> None:
    for params in BAD_QUERIES:
        query = {"format": output, **params}
        response = await archived_api.get("/v1/runs/run-a/episodes", params=query)
        assert response.status_code == 422, params
        assert error_of(response)["code"] == "validation_error", params
    for path in ["/v1/runs/run%00a", "/v1/runs/run%00a/episodes"]:
        response = await archived_api.get(path)
        assert response.status_code == 422 and error_of(response)["details"][0]["loc"] == [
            "path",
            "run",
        ]


async def test_the_largest_offset_is_an_empty_page(archived_api: httpx.AsyncClient) -> None:
    page = await archived_api.get("/v1/runs/run-a/episodes", params={"offset": 2**63 - 1})
    assert page.status_code == 200
    assert page.json()["total"] == 2 and page.json()["episodes"] == []


async def test_an_unknown_run_is_run_not_found_in_every_form(
    archived_api: httpx.AsyncClient,
) -> None:
    for path, params in [("/v1/runs/nope", {}), ("/v1/runs/nope/episodes", {}),
                         ("/v1/runs/nope/episodes", {"format": "jsonl"})]:  # fmt: skip
        response = await archived_api.get(path, params=params)
        assert response.status_code == 404, (path, params)
        assert error_of(response)["code"] == "run_not_found"
        assert "'nope'" in error_of(response)["message"]
    # A known run that no episode of matches the filters is not an error.
    nothing = {"outcome": "draw"}
    page = await archived_api.get("/v1/runs/run-a/episodes", params=nothing)
    assert page.status_code == 200 and page.json()["total"] == 0
    lines = await archived_api.get("/v1/runs/run-a/episodes", params=nothing | {"format": "jsonl"})
    assert lines.status_code == 200 and lines.text == ""


async def test_run_labels_may_hold_slashes(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, example=0, run="org/model 1")
    await api.delete(f"/v1/episodes/{episode['id']}")
    summary = await wait_archived(api, "org/model 1", 1)
    assert summary["run"] == "org/model 1"
    page = (await api.get("/v1/runs/org%2Fmodel%201/episodes")).json()
    assert [ep["id"] for ep in page["episodes"]] == [episode["id"]]


async def test_an_aborted_episode_is_archived_too(api: httpx.AsyncClient) -> None:
    assert (await api.get("/readyz")).status_code == 200
    [episode] = await create(api, example=0, run="single")
    await step(api, episode["id"], "pass", 0)  # leaves it active: not archived
    await api.delete(f"/v1/episodes/{episode['id']}")
    summary = await wait_archived(api, "single", 1)
    assert summary["statuses"] == {"aborted": 1} and summary["reward"] is None
