"""Faults with load running: agents play games without pause on a real
``wander serve`` with Redis (the test's own server, append-only file fsynced at every
write) and PostgreSQL (behind a proxy the test cuts), while the test

1. kills Redis with SIGKILL and starts it again on the same files;
2. cuts the database off for a few seconds and restores it;
3. kills the service with ``kill -9`` and starts it again.

On a Redis Cluster of the test's own (three primaries, the same append-only file), it
kills one primary with SIGKILL and starts it again on its port, files and ``nodes.conf``:
while it is away, requests for episodes of its slots are refused with 503
``store_unavailable`` and those of the other primaries are served.

Then it waits for the archive to drain and compares what the clients saw finish with
what the archive holds: nothing lost, nothing twice. The only 5xx the clients may see
are 503 ``store_unavailable`` (while Redis is away), which the client retries; while
the service is away they get no answer at all, and retry too. ``pytest -s`` prints the
report; README's "Reliability" section quotes it.
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from redis.crc import key_slot

from tests.helpers import ARCHIVER, UNHANDLED_ERRORS, log_records
from tests.load import Account, Players, Traffic, account
from tests.proxy import OutageProxy, behind_proxy
from tests.redis_cluster import start_cluster
from tests.redis_server import RedisServer
from wander.service.archive.migrations import upgrade
from wander.service.redis_url import parse_redis_url
from wander.service.store.partitions import Layout
from wander.service.store.redis import RedisStore
from wander.service.store.targets import async_client
from wander.testing import RedisCluster, ServiceProcess

RUN = "faults"
AOF = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
"""Every write on disk before Redis answers it: a kill loses nothing it acknowledged.
(``everysec``, Redis's default with AOF on, may lose the last second.)"""
SETTLE_SECONDS = 4.0
"""Load between faults, so each phase shows the service serving again."""
RETRYABLE = {"503 store_unavailable"}


@dataclass(frozen=True)
class Phase:
    """What the clients went through during one fault and the load after it."""

    name: str
    seconds: float
    traffic: Traffic
    finished: int


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A Redis of the test's own, its files in a directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="wander-faults-") as directory:
        server = RedisServer(Path(directory), AOF).start()
        yield server
        server.stop()


@pytest.fixture
def database(postgresql_url: str) -> Iterator[tuple[OutageProxy, str]]:
    """The test's PostgreSQL database, migrated, behind a proxy that can cut it off."""
    upgrade(postgresql_url)
    with behind_proxy(postgresql_url) as (outage, url):
        yield outage, url


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    """A Redis Cluster of the test's own, its files in a directory removed afterwards.
    With no replica, a primary away leaves its slots unserved; ``cluster-require-full-
    coverage no`` keeps the other primaries serving theirs meanwhile (the default would
    refuse every slot once the others see it fail, after ``cluster-node-timeout``)."""
    with tempfile.TemporaryDirectory(prefix="wander-faults-cluster-") as directory:
        started = start_cluster(Path(directory), [*AOF, "--cluster-require-full-coverage", "no"])
        yield started
        started.stop()


def serve(redis_url: str, database_url: str) -> ServiceProcess:
    environment = {
        "WANDER_REDIS_URL": redis_url,
        "WANDER_DATABASE_URL": database_url,
        # What a killed service's archiver had taken is taken over after this long.
        "WANDER_ARCHIVE_CLAIM_SECONDS": "2",
        "WANDER_LOG_LEVEL": "warning",
    }
    return ServiceProcess(environment).start()


@pytest.fixture
def wander(
    redis_server: RedisServer, database: tuple[OutageProxy, str]
) -> Iterator[ServiceProcess]:
    process = serve(redis_server.url, database[1])
    yield process
    process.stop()


@pytest.fixture
def wander_on_cluster(
    cluster: RedisCluster, database: tuple[OutageProxy, str]
) -> Iterator[ServiceProcess]:
    process = serve(cluster.url, database[1])
    yield process
    process.stop()


class Timeline:
    """Runs faults one after the other with ``players`` playing, and keeps each phase."""

    def __init__(self, players: Players) -> None:
        self.players = players
        self.phases: list[Phase] = []

    async def phase(self, name: str, fault: Callable[[], Awaitable[object]]) -> None:
        traffic, finished = self.players.traffic.copy(), len(self.players.finished)
        started = time.monotonic()
        await fault()
        await asyncio.sleep(SETTLE_SECONDS)
        self.phases.append(
            Phase(
                name,
                time.monotonic() - started,
                self.players.traffic - traffic,
                len(self.players.finished) - finished,
            )
        )


@pytest.mark.timeout(300)  # about a minute; restarts take longer on a busy machine
async def test_faults_under_load_lose_and_duplicate_nothing(
    wander: ServiceProcess,
    redis_server: RedisServer,
    database: tuple[OutageProxy, str],
    postgresql_url: str,
) -> None:
    outage = database[0]
    players = Players(wander.url, RUN, agents=8)
    timeline = Timeline(players)
    playing = asyncio.create_task(players.play())

    async def kill_redis() -> None:
        redis_server.kill()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(redis_server.start)

    async def cut_database() -> None:
        await asyncio.to_thread(outage.down)
        await asyncio.sleep(5.0)
        outage.up()

    async def kill_service() -> None:
        await asyncio.to_thread(wander.kill)
        await asyncio.to_thread(wander.start)

    async def nothing() -> None:
        return None

    try:
        await timeline.phase("steady load", nothing)
        await timeline.phase("Redis killed (SIGKILL), restarted after 1 s", kill_redis)
        await timeline.phase("database cut for 5 s, then restored", cut_database)
        await timeline.phase("service killed (kill -9), restarted", kill_service)
    finally:
        players.stop.set()
        await asyncio.wait_for(playing, 60)  # each agent finishes its game
    result = await drained(players.finished, postgresql_url)
    print(report(timeline.phases, players, result))

    assert result.lost == [], log_records(wander, ARCHIVER)
    assert result.duplicated == []
    assert players.broken == {}, log_records(wander, UNHANDLED_ERRORS)
    assert set(players.traffic.server_errors) <= RETRYABLE, players.traffic.server_errors
    assert all(phase.finished > 0 for phase in timeline.phases), "a fault stopped the games"


@pytest.mark.timeout(300)  # about half a minute; restarts take longer on a busy machine
async def test_a_cluster_primary_killed_under_load_loses_and_duplicates_nothing(
    wander_on_cluster: ServiceProcess, cluster: RedisCluster, postgresql_url: str
) -> None:
    victim = cluster.ports[0]
    away, serving = partitions_of(cluster, victim)
    assert away and serving, "the layout puts partitions on every primary"
    players = Players(wander_on_cluster.url, RUN, agents=8)
    timeline = Timeline(players)
    playing = asyncio.create_task(players.play())
    during: dict[int, Counter[str]] = {}

    async def kill_primary() -> None:
        await asyncio.to_thread(cluster.kill, victim)
        await asyncio.sleep(0.5)  # the service finds out on its own
        during.update(await probe(wander_on_cluster.url, [*away, *serving]))
        await asyncio.to_thread(cluster.restart, victim)

    async def nothing() -> None:
        return None

    try:
        await timeline.phase("steady load", nothing)
        await timeline.phase("a primary killed (SIGKILL), restarted", kill_primary)
    finally:
        players.stop.set()
        await asyncio.wait_for(playing, 60)
    result = await drained(players.finished, postgresql_url)
    print(report(timeline.phases, players, result, "a Redis Cluster of 3 primaries, each"))

    refused, served = (
        Counter({"503 store_unavailable": PROBES}),
        Counter({"404 episode_not_found": PROBES}),
    )
    assert {index: during[index] for index in away} == {index: refused for index in away}
    # The others serve; while the client finds the cluster's new shape, a request may yet be
    # a retryable 503 (seen once in CI), never anything else.
    for index in serving:
        assert during[index]["404 episode_not_found"] > 0, (index, during[index])
        assert set(during[index]) <= set(refused) | set(served), (index, during[index])
    assert result.lost == [], log_records(wander_on_cluster, ARCHIVER)
    assert result.duplicated == []
    assert players.broken == {}, log_records(wander_on_cluster, UNHANDLED_ERRORS)
    assert set(players.traffic.server_errors) <= RETRYABLE, players.traffic.server_errors
    assert all(phase.finished > 0 for phase in timeline.phases), "a fault stopped the games"


async def test_a_command_that_meets_a_primarys_kill_fails_only_as_unreachable(
    cluster: RedisCluster,
) -> None:
    """The store's cluster client under 48 commands at once while each primary in turn is
    killed and restarted, twice: a command fails only as unreachable (the store's 503),
    never with an error of the socket layer under it (a 500: redis-py disconnected
    connections that commands had just taken, ``store/targets.py``)."""
    client = async_client(parse_redis_url(cluster.url), max_connections=64)
    stop = asyncio.Event()
    unexpected: Counter[str] = Counter()

    async def commands(worker: int) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            key = f"wander-test:{worker}:{count % 100}"
            try:
                await client.set(key, count)
                await client.get(key)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                await asyncio.sleep(0.01)
            except Exception as exc:
                unexpected[f"{type(exc).__name__}: {exc}"] += 1
                await asyncio.sleep(0.01)

    workers = [asyncio.create_task(commands(worker)) for worker in range(48)]
    try:
        for victim in [*cluster.ports, *cluster.ports]:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(cluster.kill, victim)
            await asyncio.sleep(0.7)
            await asyncio.to_thread(cluster.restart, victim)
    finally:
        stop.set()
        await asyncio.gather(*workers)
        await client.aclose()
    assert unexpected == Counter()


PROBES = 3
"""Requests per partition while its primary is away, or while the others' are not."""


def partitions_of(cluster: RedisCluster, port: int) -> tuple[list[int], list[int]]:
    """The store's partitions (those of a cluster store with its default count) whose
    hash slot the primary on ``port`` serves, and the others."""
    with redis.Redis(port=port) as client:
        ranges = [
            (start, end)
            for start, end, (_, owner, *_), *_ in client.cluster("slots")
            if owner == port
        ]
    count = inspect.signature(RedisStore.from_url).parameters["partitions"].default
    slots = [key_slot(partition.stream.encode()) for partition in Layout("x", count).partitions]
    mine = [i for i, slot in enumerate(slots) if any(a <= slot <= b for a, b in ranges)]
    return mine, [i for i in range(count) if i not in mine]


async def probe(url: str, partitions: list[int]) -> dict[int, Counter[str]]:
    """What ``GET /v1/episodes/{id}`` answers, ``PROBES`` times, for an id of each of
    ``partitions`` that no episode has: the store is asked, and says 404, or is away."""
    answers: dict[int, Counter[str]] = {index: Counter() for index in partitions}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(PROBES):
            for index in partitions:
                response = await client.get(f"/v1/episodes/ep_p{index}-probe")
                code = response.json().get("error", {}).get("code")
                answers[index][f"{response.status_code} {code}"] += 1
    return answers


async def drained(finished: dict[str, int], database_url: str) -> Account:
    """The account once every game the clients saw finish is archived, or after 60 s (the
    archiver backs off up to 10 s while the database is away)."""
    deadline = time.monotonic() + 60
    while True:
        result = await asyncio.to_thread(account, finished, database_url, RUN)
        if not result.lost or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.5)


def report(phases: list[Phase], players: Players, result: Account, store: str = "Redis") -> str:
    """The figures README's "Reliability" section quotes."""
    traffic = players.traffic
    header = f"{'phase':<46} {'s':>5} {'requests':>8} {'no answer':>9} {'5xx':>5} {'games':>6}"
    lines = ["", f"fault test: 8 agents, {store} {' '.join(AOF)}, PostgreSQL through a proxy"]
    lines.append(header)
    lines += (
        f"{phase.name:<46} {phase.seconds:>5.1f} {phase.traffic.requests:>8} "
        f"{phase.traffic.unanswered:>9} {phase.traffic.refused:>5} {phase.finished:>6}"
        for phase in phases
    )
    statuses = dict(sorted(traffic.statuses.items()))
    lines += [
        f"requests {traffic.requests}, no answer {traffic.unanswered}, by status {statuses}, "
        f"5xx {dict(traffic.server_errors) or 0}",
        f"games finished (as the clients saw them) {result.finished}, archived "
        f"{result.archived} ({result.unseen} never seen finished), lost {len(result.lost)}, "
        f"duplicated {len(result.duplicated)}, cut short {len(players.broken)} "
        f"{dict(Counter(players.broken.values())) or ''}",
    ]
    return "\n".join(lines)
