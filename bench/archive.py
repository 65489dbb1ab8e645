"""Does the archive keep up? Its throughput per database, and its backlog under load.

1. **Under load**: a ``wander serve`` per store (the in-process one with its SQLite
   archive, what ``make serve`` runs; Redis) and per writer (``WANDER_ARCHIVE_WRITER``:
   a process of its own, or a thread of the service), driven for ``--seconds`` by the
   batch load of issue 38 (``--clients`` clients, each stepping ``--width`` live
   tic-tac-toe episodes per request against the random opponent, refilling as games
   end): games finished per second, and the archive's backlog sampled every second.
2. **Uncontended**: the records of a run written by each writer into a fresh SQLite
   file and a fresh PostgreSQL database (``--postgres``; ``--processes`` writer
   processes there), chunk after chunk as the archiver writes them, with nothing else
   running: records per second.

    python -m bench.archive --seconds 30

Prints JSON lines, one per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench.loadgen import run_load
from bench.measure import backlog, forget_prefix
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.migrations import upgrade
from wander.service.archive.writer import WriterKind, writer_for
from wander.testing import ServiceProcess

WRITERS: tuple[WriterKind, ...] = ("process", "thread")
RUN = "bench-archive"


@contextlib.contextmanager
def served(store: str, writer: WriterKind, database: str, redis_url: str) -> Iterator[str]:
    """A service's URL; its Redis keys are deleted afterwards."""
    prefix = f"bench-archive-{secrets.token_hex(4)}:"
    env = {
        "WANDER_DATABASE_URL": database,
        "WANDER_ARCHIVE_WRITER": writer,
        "WANDER_LOG_LEVEL": "warning",
        "WANDER_REDIS_URL": redis_url if store == "redis" else "",
        "WANDER_REDIS_PREFIX": prefix,
    }
    process = ServiceProcess(env).start()
    try:
        yield process.url
    finally:
        process.stop()
        if store == "redis":
            forget_prefix(redis_url, prefix)


async def under_load(
    store: str, writer: WriterKind, args: argparse.Namespace, directory: Path
) -> dict[str, Any]:
    database = f"sqlite:///{directory}/{store}-{writer}.db"
    upgrade(database)
    with served(store, writer, database, args.redis_url) as url:
        samples: list[int] = []

        async def sample() -> None:
            while True:
                samples.append(await asyncio.to_thread(backlog, url))
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample())
        result = await run_load(
            url, args.clients, args.seconds, "batch", args.width, "random", run=RUN
        )
        sampler.cancel()
        at_end = backlog(url)
        started = time.monotonic()
        while backlog(url):
            await asyncio.sleep(0.1)
        drained = time.monotonic() - started
    return {
        "part": "under load",
        "store": store,
        "writer": writer,
        "games_per_s": round(result.episodes_per_s),
        "steps_per_s": round(result.steps_per_s),
        "errors": result.errors,
        "backlog_max": max(samples, default=0),
        "backlog_at_end": at_end,
        "seconds_of_finishes_behind": round(max(samples, default=0) / result.episodes_per_s, 2),
        "drained_after_s": round(drained, 2),
        "database": database,
    }


async def uncontended(kind: WriterKind, url: str, records: list[bytes], processes: int) -> float:
    """Records per second ``kind`` writes into ``url``, chunk after chunk (``processes``
    writer processes on PostgreSQL)."""
    archive = Archive(url)
    writer = writer_for(kind, archive, processes)
    try:
        await writer.write(records[: writer.chunk])  # start-up: a process, a connection
        started = time.perf_counter()
        for start in range(0, len(records), writer.chunk):
            await writer.write(records[start : start + writer.chunk])
        return len(records) / (time.perf_counter() - started)
    finally:
        await writer.aclose()
        archive.dispose()


def recorded(database: str, count: int) -> list[bytes]:
    """``count`` records like those of ``database``'s run, each with an id of its own."""
    archive = Archive(database)
    try:
        played = archive.episodes(RUN, EpisodeFilter(), tenant=None, limit=1000, offset=0).episodes
    finally:
        archive.dispose()
    if not played:
        raise RuntimeError("the load archived no episode")
    copies = (played[i % len(played)].model_copy(update={"id": f"ep_{i}"}) for i in range(count))
    return [copy.model_dump_json().encode() for copy in copies]


@contextlib.asynccontextmanager
async def postgres_database(server: str) -> AsyncIterator[str]:
    """A fresh, migrated PostgreSQL database on ``server`` (a ``postgresql://`` URL of a
    database there), dropped afterwards."""
    name = f"wander_bench_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = f"postgresql+psycopg://{server.split('://', 1)[1].rsplit('/', 1)[0]}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        rows = []
        for store in ("memory", "redis"):
            for writer in WRITERS:
                rows.append(await under_load(store, writer, args, directory))
                print(json.dumps(rows[-1]), flush=True)
        # Records of the load's own run, with the tic-tac-toe games as they were played.
        records = recorded(rows[0]["database"], args.records)
        sqlite = f"sqlite:///{directory}/uncontended.db"
        upgrade(sqlite)
        async with postgres_database(args.postgres) as postgresql:
            for database, url in (("sqlite", sqlite), ("postgresql", postgresql)):
                for kind in WRITERS:
                    rate = await uncontended(kind, url, records, args.processes)
                    row = {"part": "uncontended", "database": database, "writer": kind}
                    print(json.dumps({**row, "records_per_s": round(rate)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument(
        "--processes", type=int, default=2, help="writer processes on PostgreSQL (the default)"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres", default="postgresql://127.0.0.1/test")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
