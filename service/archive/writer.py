"""Where the archiver's writes run: in a process of their own, or in a thread of the
service.

Parsing records and writing them hold the GIL. In a thread of the service they take it
from the event loop's requests, and lose it to them: each time the database call gives
the GIL up, getting it back waits behind the busy loop for up to the switch interval
(5 ms), again and again in one write. Under sustained load the archive of the embedded
default fell 27 s behind in 30 s (bench/README.md, "Sustained load") though the same
writes, uncontended, run at ~9,000 records/s on SQLite. A process of its own has a GIL of
its own: the service only hands it the records' bytes and reads their ids back.

The process is ``python -m wander.service.archive.writer``, a fresh interpreter (nothing
of the service's memory or threads comes along), started with the service; it reads
the database's URL, then each chunk of records, as frames on its stdin (``frames.py``,
pickled: only the two processes speak here, and a record is bytes to them), and answers
each with the ids or the error, on its stdout. It ends at the end of its stdin, and dies
with the service (``PR_SET_PDEATHSIG``), so a ``kill -9`` leaves none behind. A database
held in memory (``sqlite://``) exists in the service's process only: it is written from a
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import pickle
import signal
import sys
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from wander.client.models import EpisodeRecord
from wander.service.archive.database import Archive, RecordRefused
from wander.service.errors import DatabaseUnavailable
from wander.service.frames import HEADER, frame, read_frame, write_frame

WriterKind = Literal["process", "thread"]
PR_SET_PDEATHSIG = 1
STOP_SECONDS = 10.0
"""How long a writer process may take to finish its write in hand once told to stop."""


class WriterStopped(DatabaseUnavailable):
    """A writer process ended during a write (killed, out of memory, or it could not
    start). Nothing it was given is acknowledged, and, as when the database is down, the
    archiver backs off and tries again, and sets no record aside for it: a writer that
    cannot run must stall the archive visibly (``/readyz``), not turn every record into
    a dead letter."""


class RecordWriter(Protocol):
    """Writes queued records (their bytes) into the archive; returns their episodes' ids."""

    chunk: int
    """The most records per ``write``: each is its own transaction."""

    async def start(self) -> None:
        """Get ready for the first write, without waiting for it to be ready."""

    async def write(self, records: Sequence[bytes]) -> list[str]: ...

    async def aclose(self) -> None: ...


def writer_for(kind: WriterKind, archive: Archive, processes: int = 1) -> RecordWriter:
    """The writer the settings ask for (``WANDER_ARCHIVE_WRITER``,
    ``WANDER_ARCHIVE_WRITER_PROCESSES``) of ``archive``: processes unless the database
    lives in this process's memory."""
    url = archive.engine.url
    in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
    if kind == "thread" or in_memory:
        return ThreadWriter(archive)
    return ProcessWriter(archive.url, processes)


class ThreadWriter:
    """Writes from a thread of this process, through ``archive``."""

    chunk = 20
    """The thread holds the GIL while it parses and writes, and the event loop, each time
    it wakes, waits behind it for up to Python's switch interval (5 ms), again and again
    until the call returns: 200 records in one call put most of the slowest WebSocket
    steps behind an archive write; 20 fit under the switch interval. Reading batches of 20
    from the store instead does as well for the tail but falls behind, each of its store
    calls waiting its turn on the busy loop, while chunks keep the backlog short
    (bench/README.md, "The WebSocket tail", has the figures)."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    async def start(self) -> None:
        return None

    async def write(self, records: Sequence[bytes]) -> list[str]:
        return await asyncio.to_thread(write_records, self.archive, records)

    async def aclose(self) -> None:
        return None


class ProcessWriter:
    """Writes from ``processes`` processes of their own, each through an ``Archive`` of
    ``url`` there: a call's records are split between them, each part its own
    transaction. The writers are bound by their own CPU (parsing and building rows more
    than the database's work): PostgreSQL takes their transactions at once, SQLite one
    at a time while the other parses (its writers wait their turn, WAL and a busy
    timeout); two wrote ~1.5x what one did on each (bench/README.md)."""

    chunk = 500
    """A whole batch: the GILs they hold are their own, and each call is a round trip
    through the service's event loop, which waits its turn there under load."""

    def __init__(self, url: str, processes: int = 1) -> None:
        self._processes = [_WriterProcess(url) for _ in range(processes)]

    async def start(self) -> None:
        """Start the processes now, with the service: a fresh interpreter takes a second
        or more to import what it writes with (several on a busy machine), and the games
        that finish meanwhile would wait in the backlog, lost to a ``kill -9`` of those
        seconds. Their start is not awaited; one that could not start is tried again at
        its first write, which says why."""
        await asyncio.gather(*(process.start() for process in self._processes))

    async def write(self, records: Sequence[bytes]) -> list[str]:
        """The ids of ``records``, in order; the first error of a part, once every part
        is done (those that were written are written again with the rest: upserts)."""
        count = len(self._processes)
        size = -(-len(records) // count) or 1
        parts = [records[start : start + size] for start in range(0, len(records), size)]
        answers = await asyncio.gather(
            *(process.write(part) for process, part in zip(self._processes, parts, strict=False)),
            return_exceptions=True,
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return [episode_id for answer in answers for episode_id in answer]  # type: ignore[union-attr]

    async def aclose(self) -> None:
        """Stop the processes once their writes in hand, if any, are done."""
        await asyncio.gather(*(process.aclose() for process in self._processes))


class _WriterProcess:
    """One writer process, started with the service (or again at the write after one
    that it did not survive), asked one write at a time."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._process: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()

    async def start(self) -> None:
        async with self._turn:
            if self._process is None:
                with contextlib.suppress(OSError):
                    await self._start()

    async def write(self, records: Sequence[bytes]) -> list[str]:
        async with self._turn:
            process = self._process or await self._start()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(frame(pickle.dumps(list(records))))
                await process.stdin.drain()
                header = await process.stdout.readexactly(HEADER)
                reply = await process.stdout.readexactly(int.from_bytes(header, "big"))
            except (OSError, asyncio.IncompleteReadError) as exc:
                await self._stop(kill=True)
                raise WriterStopped(f"the archive's writer process stopped: {exc}") from None
        kind, value = pickle.loads(reply)
        if kind == "error":
            raise value
        return list(value)

    async def _start(self) -> asyncio.subprocess.Process:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wander.service.archive.writer", str(os.getpid()),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self._process.stdin is not None
        self._process.stdin.write(frame(pickle.dumps(self.url)))
        return self._process

    async def aclose(self) -> None:
        async with self._turn:
            await self._stop(kill=False)

    async def _stop(self, *, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()  # the end of its requests: it returns
        if kill:
            _kill(process)
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            _kill(process)
            await process.wait()


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has ended already
        process.kill()


def write_records(archive: Archive, records: Sequence[bytes]) -> list[str]:
    """Parse ``records`` and write them; their ids. ``UnreadableRecord`` if one is not an
    ``EpisodeRecord``, else what ``Archive.write`` raises."""
    parsed = parse_records(records)
    archive.write(parsed)
    return [record.id for record in parsed]


class UnreadableRecord(RecordRefused):
    """A queued record that is not an ``EpisodeRecord``: refused before the database saw
    it."""


def parse_records(records: Sequence[bytes]) -> list[EpisodeRecord]:
    """The queued records; one that is not an ``EpisodeRecord`` can never be written."""
    try:
        return [EpisodeRecord.model_validate_json(item) for item in records]
    except ValidationError as exc:
        errors = "; ".join(
            ": ".join(filter(None, [".".join(map(str, e["loc"])), e["msg"]])) for e in exc.errors()
        )
        raise UnreadableRecord(f"not an episode record: {errors}"[:1000]) from exc


def main() -> None:
    """The writer process: arm the parent-death signal, read the URL, then write each
    chunk of records it is sent until its stdin ends."""
    service = int(sys.argv[1])
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != service:  # the service died before the signal was armed
        return
    requests, replies = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    url = read_frame(requests)
    if url is None:
        return
    archive = Archive(pickle.loads(url))
    try:
        while (request := read_frame(requests)) is not None:
            write_frame(replies, pickle.dumps(_answer(archive, pickle.loads(request))))
    finally:
        archive.dispose()


def _answer(archive: Archive, records: list[bytes]) -> tuple[str, Any]:
    """``("ids", [...])``, or ``("error", exception)``: the exception itself where it
    pickles, else a ``RuntimeError`` that says what it was."""
    try:
        return "ids", write_records(archive, records)
    except Exception as exc:
        with contextlib.suppress(Exception):
            pickle.loads(pickle.dumps(exc))
            return "error", exc
        return "error", RuntimeError(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":  # run as the module itself, so that its errors unpickle as its
    from wander.service.archive import writer

    writer.main()
