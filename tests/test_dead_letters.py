"""A record the database refuses never blocks the archive: it is set aside as a dead
letter with its error, and the records around it are archived.

On PostgreSQL, which refuses what SQLite stores anyway (NUL in text, a value longer than
its column), on every store: in-process, Redis and Redis Cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
import sqlalchemy
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import archived_ids, error_of, logged, service
from tests.poison import NUL_RUN, REFUSE_CURSED, execute, queue
from tests.records import tictactoe_record, with_outcome
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.migrations import upgrade
from wander.service.archive.writer import ProcessWriter, ThreadWriter, writer_for
from wander.service.archiver import Archiver
from wander.service.errors import ArchiveStalled
from wander.service.settings import Settings
from wander.service.store import EpisodeStore, open_store

STORE_KINDS = ["memory", "redis", "cluster"]


@pytest.fixture
def archive(postgresql_url: str) -> Iterator[Archive]:
    upgrade(postgresql_url)
    archive = Archive(postgresql_url)
    yield archive
    archive.dispose()


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[EpisodeStore]:
    store = open_store(settings)
    yield store
    await store.aclose()


def archived(archive: Archive, run: str = "run-a") -> list[str]:
    page = archive.episodes(run, EpisodeFilter(), tenant=None, limit=1000, offset=0)
    return [episode.id for episode in page.episodes]


async def stalled(archiver: Archiver, attempts: int, seconds: float = 60.0) -> ArchiveStalled:
    """What ``check_progress`` says once ``archiver`` has failed ``attempts`` times in a
    row for its ``stall_seconds``; fail if it never does."""
    for _ in range(int(seconds / 0.1)):
        try:
            archiver.check_progress()
        except ArchiveStalled as stall:
            if stall.details["attempts"] >= attempts:
                return stall
        await asyncio.sleep(0.1)
    raise AssertionError(f"the archive did not stall after {attempts} attempts")


async def drained(archiver: Archiver, seconds: float = 10.0) -> None:
    """Run ``archiver`` until the backlog is empty; fail if it never is."""
    worker = asyncio.create_task(archiver.run())
    try:
        for _ in range(int(seconds / 0.05)):
            if await archiver.store.backlog() == 0:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{await archiver.store.backlog()} records never left the backlog")
    finally:
        archiver.stop()
        await worker
        await archiver.writer.aclose()


async def test_poison_records_are_dead_lettered_and_the_others_archived(
    store: EpisodeStore, archive: Archive
) -> None:
    records = [tictactoe_record(i, "win") for i in range(6)]
    records[1] = tictactoe_record(1, "win", run=NUL_RUN)
    records[4] = with_outcome(records[4], "x" * 65)
    await queue(store, *records)

    await drained(Archiver(store, archive, poll_seconds=0.05))

    assert archived(archive) == ["ep_0000", "ep_0002", "ep_0003", "ep_0005"]
    letters = await store.dead_letters(10)
    assert [letter.data for letter in letters] == [
        records[1].model_dump_json().encode(),
        records[4].model_dump_json().encode(),
    ]
    assert "NUL" in letters[0].error
    assert "value too long for type character varying(64)" in letters[1].error
    assert await store.dead_letter_count() == 2


@pytest.mark.parametrize("store_kind", ["memory"])  # it judges alike on every store
async def test_the_writer_process_judges_each_record_as_the_thread_does(
    store: EpisodeStore, archive: Archive, postgresql_url: str
) -> None:
    """The archive's own process (``WANDER_ARCHIVE_WRITER=process``) hands each refusal back
    as what it is: a record the database refuses or that is no record is set aside at
    once, one refused for no reason named after three attempts, and the rest archived."""
    execute(postgresql_url, *REFUSE_CURSED)
    records = [tictactoe_record(i, "win") for i in range(5)]
    records[1] = tictactoe_record(1, "win", run=NUL_RUN)
    records[3] = tictactoe_record(3, "win", run="cursed")
    await queue(store, *records, b'{"id": "ep_junk"}')
    writer = writer_for("process", archive)
    assert isinstance(writer, ProcessWriter)

    await drained(Archiver(store, archive, writer=writer, poll_seconds=0.05))

    assert archived(archive) == ["ep_0000", "ep_0002", "ep_0004"]
    errors = [letter.error for letter in await store.dead_letters(10)]
    assert "NUL" in errors[0]
    assert errors[1].startswith("not an episode record: env: Field required")
    assert errors[2].startswith("WriteRefused: RaiseException: cursed runs are refused")
    assert errors[2].endswith("(after 3 attempts)")


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_writer_process_that_cannot_run_stalls_the_archive_and_sets_nothing_aside(
    store: EpisodeStore, archive: Archive
) -> None:
    """Its process ends at once (it cannot open the archive it is given): every attempt
    fails, the records stay queued, none becomes a dead letter, and the stall is said."""
    await queue(store, *(tictactoe_record(i, "win") for i in range(3)))
    writer = ProcessWriter("nosuchdb://nowhere")
    archiver = Archiver(store, archive, writer=writer, poll_seconds=0.05, stall_seconds=0.5)
    worker = asyncio.create_task(archiver.run())
    try:
        stall = await stalled(archiver, attempts=4)  # each starts a process that ends at once
        assert "writer process stopped" in stall.message
    finally:
        archiver.stop()
        await worker
        await writer.aclose()
    assert await store.backlog() == 3
    assert await store.dead_letter_count() == 0
    assert archived(archive) == []


async def test_a_poison_record_after_written_chunks_leaves_each_other_record_archived_once(
    store: EpisodeStore, archive: Archive
) -> None:
    """A batch is written in chunks, each its own transaction: when a later chunk fails,
    the chunks already committed are written again with the rest, as the same rows."""
    records = [tictactoe_record(i, "win") for i in range(2 * ThreadWriter.chunk + 5)]
    poison = 2 * ThreadWriter.chunk + 3  # in the third chunk
    records[poison] = tictactoe_record(poison, "win", run=NUL_RUN)
    await queue(store, *records)

    await drained(Archiver(store, archive, poll_seconds=0.05))

    assert archived(archive) == [r.id for i, r in enumerate(records) if i != poison]
    [letter] = await store.dead_letters(10)
    assert letter.data == records[poison].model_dump_json().encode()
    assert await store.backlog() == 0


async def test_a_record_failing_for_an_unnamed_reason_is_set_aside_after_three_attempts(
    store: EpisodeStore, archive: Archive, postgresql_url: str
) -> None:
    execute(postgresql_url, *REFUSE_CURSED)
    records = [tictactoe_record(i, "win") for i in range(4)]
    records[2] = tictactoe_record(2, "win", run="cursed")
    await queue(store, *records)
    errors = REGISTRY.get_sample_value("wander_database_errors_total") or 0.0

    await drained(Archiver(store, archive, poll_seconds=0.05, max_attempts=3))

    assert archived(archive) == ["ep_0000", "ep_0001", "ep_0003"]
    [letter] = await store.dead_letters(10)
    assert letter.data == records[2].model_dump_json().encode()
    assert letter.error.startswith("WriteRefused: RaiseException: cursed runs are refused")
    assert letter.error.endswith("(after 3 attempts)")
    # The batch, then the record alone three times: each failure is counted.
    assert REGISTRY.get_sample_value("wander_database_errors_total") == errors + 4


async def test_an_unreadable_record_is_set_aside_at_once(
    store: EpisodeStore, sqlite_url: str
) -> None:
    upgrade(sqlite_url)
    archive = Archive(sqlite_url)
    good = tictactoe_record(0, "win")
    await queue(store, good, b'{"id": "ep_junk", "env": 7}')
    try:
        await drained(Archiver(store, archive, poll_seconds=0.05))
        assert archived(archive) == [good.id]
    finally:
        archive.dispose()
    [letter] = await store.dead_letters(10)
    assert letter.error.startswith("not an episode record: env: Input should be a valid string")


def store_settings(request: pytest.FixtureRequest, store_kind: str, database_url: str) -> Settings:
    if store_kind in ("redis", "cluster"):
        url, prefix = request.getfixturevalue("shared_redis")
        return Settings(redis_url=url, redis_prefix=prefix, database_url=database_url)
    return Settings(redis_url=None, database_url=database_url)


async def metric(api: httpx.AsyncClient, name: str) -> float:
    """A sample of ``/metrics``, as a scraper reads it."""
    text = (await api.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"/metrics has no {name}")


async def eventually(condition: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never held")


async def test_a_database_that_takes_no_writes_stalls_the_archive_visibly(
    store_kind: str, postgresql_url: str, postgres_server_url: str, request: pytest.FixtureRequest
) -> None:
    """A read-only database (a failover to a replica) answers /readyz's ping but refuses
    every write: nothing is set aside, the backlog and the errors show in the metrics, and
    /readyz says why; once it takes writes again everything is archived."""
    upgrade(postgresql_url)
    database = sqlalchemy.make_url(postgresql_url).database
    execute(postgresql_url, f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    settings = store_settings(request, store_kind, postgresql_url)
    async with service(settings) as (app, api):
        archiver = app.state.archiver
        archiver.stall_seconds, archiver.poll_seconds = 0.5, 0.05
        records = [
            tictactoe_record(0, "win"),
            tictactoe_record(1, "win", run=NUL_RUN),
            tictactoe_record(2, "loss"),
        ]
        errors = await metric(api, "wander_database_errors_total")
        await queue(archiver.store, *records)

        async def stalled() -> bool:
            return (await api.get("/readyz")).status_code == 503

        await eventually(stalled)
        error = error_of(await api.get("/readyz"))
        assert error["code"] == "archive_stalled"
        assert "cannot execute INSERT in a read-only transaction" in error["message"]
        assert error["details"]["attempts"] >= 1
        assert await archiver.store.dead_letter_count() == 0
        assert await metric(api, "wander_archive_backlog") == 3
        assert await metric(api, "wander_archive_dead_letters") == 0
        assert await metric(api, "wander_database_errors_total") >= errors + 2

        execute(
            postgres_server_url,  # the read-only database cannot change its own setting
            f'ALTER DATABASE "{database}" RESET default_transaction_read_only',
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()",
        )

        async def archived_all_but_the_poison() -> bool:
            return (
                await metric(api, "wander_archive_backlog") == 0
                and await metric(api, "wander_archive_dead_letters") == 1
            )

        await eventually(archived_all_but_the_poison)
        assert (await api.get("/readyz")).status_code == 200
        [letter] = await archiver.store.dead_letters(10)
        assert letter.data == records[1].model_dump_json().encode()
    assert archived_ids(postgresql_url, "run-a") == ["ep_0000", "ep_0002"]


async def test_the_in_process_store_says_which_dead_letters_die_with_it(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    upgrade(sqlite_url)
    with logged(caplog, "wander.service.archiver"):
        async with service(Settings(redis_url=None, database_url=sqlite_url)) as (app, _):
            store = app.state.archiver.store
            await queue(store, b"not a record")

            async def set_aside() -> bool:
                return await store.dead_letter_count() == 1

            await eventually(set_aside)
    lost = [r.getMessage() for r in caplog.records if r.name == "wander.service.archiver"]
    assert "1 dead letters are lost with the in-process store" in lost
