"""Small helpers for playing games over HTTP in tests."""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from tests.agents import Agent
from wander.client import RunNotFound, StepError, StepResult, WanderClient
from wander.client.models import ArchivedEpisodesPage, EpisodeRecord
from wander.service.app import create_app
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.migrations import upgrade
from wander.service.envs import guard
from wander.service.settings import Settings
from wander.testing import ServiceProcess, running_processes

FORK_SERVER = "wander.service.sandbox.forkserver"
IN_THE_SHARED_LOOP = pytest.mark.asyncio(loop_scope="module")
"""The event loop a module's shared service runs in (conftest's ``shared_api``): the mark
of a test that uses it, or the ``pytestmark`` of a module whose tests all do."""
LIGHT_P99_BOUND = 0.5
"""Seconds: the p99 a light client must keep during an attack; generous for a shared
2-core machine (the tests print what they measure)."""


SQLITE_TEMPLATE: dict[str, Path] = {}
"""``"head"``: a SQLite archive that Alembic migrated to the head revision, once per
session (conftest's ``sqlite_template``); `migrate` copies it."""


def migrate(url: str) -> None:
    """The archive at ``url`` migrated to the head revision. A SQLite file not created yet
    starts as a copy of the session's migrated template: ~1 ms, where Alembic's run took
    0.1-0.18 s and ~500 tests migrate an archive. Anything else is migrated by Alembic;
    the tests of the migrations themselves call ``upgrade``."""
    template = SQLITE_TEMPLATE.get("head")
    path = sqlalchemy.make_url(url).database
    fresh_file = bool(path) and path != ":memory:" and not Path(str(path)).exists()
    if url.startswith("sqlite:") and template is not None and fresh_file:
        shutil.copyfile(template, str(path))
        return
    upgrade(url)


@contextmanager
def logged(caplog: pytest.LogCaptureFixture, name: str) -> Iterator[None]:
    """Capture what logger ``name`` writes in ``caplog``, once each: once a service has
    configured logging, its loggers no longer propagate to pytest's handler on the root
    (before, they do, so the handler goes on the logger and propagation off)."""
    logger = logging.getLogger(name)
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)
        logger.propagate = propagate


@asynccontextmanager
async def asgi_client(app: FastAPI, root_path: str = "") -> AsyncIterator[httpx.AsyncClient]:
    """``app`` started (its lifespan run), and a client that reaches it through ASGI
    (served under ``root_path`` as ``uvicorn --root-path`` serves it: the requests' paths
    start with it)."""
    async with (
        LifespanManager(app, shutdown_timeout=30) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app, root_path=root_path),
            base_url="http://wander.test",
        ) as client,
    ):
        yield client


@contextmanager
def compiles_nothing() -> Iterator[None]:
    """Fails if text is compiled or run as code inside the block: the worker's guard
    (``envs.guard``), armed, refuses it and counts it, even where a scorer swallows the
    refusal."""
    before = guard.refusals()
    with guard.untrusted():
        yield
    assert guard.refusals() == before, "text was compiled or run as code"


@contextmanager
def plugin_service(plugin_site: Path, folder: Path, **settings: str) -> Iterator[ServiceProcess]:
    """A real ``wander serve`` with the test plugin (tests/plugin: ``echo``, ``faulty``,
    ``hostile``...) on the in-process store, its SQLite archive in ``folder``, and
    ``settings`` (``WANDER_*`` variables) of its own; stopped afterwards."""
    database = f"sqlite:///{folder}/archive.db"
    migrate(database)
    env = {"PYTHONPATH": str(plugin_site), "WANDER_REDIS_URL": "", "WANDER_DATABASE_URL": database}
    process = ServiceProcess({**env, **settings}).start()
    try:
        yield process
    finally:
        process.stop()


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The service started with ``settings``, and a client for it (through ASGI)."""
    app = create_app(settings)
    async with asgi_client(app) as client:
        yield app, client


async def create(api: httpx.AsyncClient, **body: Any) -> list[dict[str, Any]]:
    response = await api.post("/v1/episodes", json={"env": "tictactoe", **body})
    assert response.status_code == 201, response.text
    episodes: list[dict[str, Any]] = response.json()["episodes"]
    return episodes


async def step(
    api: httpx.AsyncClient, episode_id: str, action: Any, turn: int | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"action": action}
    if turn is not None:
        body["turn"] = turn
    return await api.post(f"/v1/episodes/{episode_id}/step", json=body)


def tool_call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    """One OpenAI-style tool call of ``name`` with ``arguments``."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


def tools(*calls: dict[str, Any]) -> dict[str, Any]:
    """An assistant message that makes ``calls``."""
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


async def play_game(
    api: httpx.AsyncClient, episode: dict[str, Any], agent: Agent
) -> list[dict[str, Any]]:
    """Play ``episode`` to the end with ``agent``; returns the step results."""
    results = []
    board, turn, done = episode["info"]["board"], 0, False
    while not done:
        response = await step(api, episode["id"], agent(board), turn)
        assert response.status_code == 200, response.text
        result = response.json()
        results.append(result)
        board, turn, done = result["info"]["board"], result["turn"], result["done"]
    return results


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error object of an error response, checking the documented shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


def archived_ids(database_url: str, run: str) -> list[str]:
    """The ids of ``run``'s archived episodes, oldest first (up to 1,000), read anew."""
    archive = Archive(database_url)
    try:
        page = archive.episodes(run, EpisodeFilter(), tenant=None, limit=1000, offset=0)
    finally:
        archive.dispose()
    return [episode.id for episode in page.episodes]


def archived(
    client: WanderClient, run: str, episodes: int, limit: int = 100
) -> ArchivedEpisodesPage:
    """The first ``limit`` of ``run``'s archived episodes once the archive holds at least
    ``episodes`` of them: the archive writes behind a game's end, and a run it holds
    nothing of yet is a 404 (``RunNotFound``) until then."""
    deadline = time.monotonic() + 15
    total = 0
    while True:
        with suppress(RunNotFound):
            page = client.episodes(run, limit=limit)
            if page.total >= episodes:
                return page
            total = page.total
        assert time.monotonic() < deadline, f"run {run} archived {total} of {episodes} in 15 s"
        time.sleep(0.1)


def write_archive(database_url: str, records: Sequence[EpisodeRecord]) -> None:
    """``records`` written straight into the (migrated) archive at ``database_url``."""
    archive = Archive(database_url)
    try:
        archive.write(records)
    finally:
        archive.dispose()


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98]


def fork_servers(service: int) -> list[int]:
    """The fork servers the service process ``service`` started (one, once it needed it)."""
    return [p.pid for p in running_processes() if p.ppid == service and FORK_SERVER in p.command]


def workers_of(service: int) -> list[int]:
    """The environment workers of the service process ``service``: its fork server's
    children (busy, or forked ahead of need)."""
    servers = set(fork_servers(service))
    return [p.pid for p in running_processes() if p.ppid in servers]


class DeletingClient(WanderClient):
    """Deletes (aborts) the first episode of the ``at``-th batch of steps it sends (the
    second by default), just before sending it: the service answers that episode's
    step with an error."""

    def __init__(self, url: str, at: int = 2) -> None:
        super().__init__(url)
        self.rounds, self.at = 0, at
        self.deleted: list[str] = []

    def step_many(self, steps: Sequence[Mapping[str, Any]]) -> list[StepResult | StepError]:
        self.rounds += 1
        if self.rounds == self.at:
            self.deleted.append(steps[0]["episode_id"])
            self.delete(self.deleted[-1])
        return super().step_many(steps)


def played_elsewhere(factory: Any) -> tuple[str, str, str]:
    """In a worker process, as TRL's ``AsyncGRPOTrainer`` runs its ``environment_factory``
    (given unpickled): one rollout's reset and first tool call; the class's name, the
    tool's reply and the episode's id."""
    environment = factory()
    environment.reset(example=0)
    return type(environment).__name__, environment.list_tables(), environment._episode.id


UNHANDLED_ERRORS = "unhandled error"
"""In the log record of each 500, with its traceback."""
ARCHIVER = '"logger": "wander.service.archiver"'
"""In each log record of the archiver: why it paused, what it set aside."""


def log_records(service: ServiceProcess, text: str) -> str:
    """The service's log records (one JSON line each) that hold ``text``: what a test that
    failed says, since such a failure may not come back on a rerun."""
    return "\n".join(line for line in service.logs().splitlines() if text in line)
