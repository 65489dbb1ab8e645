"""The in-process store's archive backlog kept in a SQLite file, so that ``kill -9`` of
the embedded default (in-process store, SQLite archive: what ``make serve`` runs) loses
no game it reported finished.

Under load the archiver falls behind the games (it shares the process and its GIL with
the requests): a backlog held only in memory died with the process, 90% of 30 s of batch
load once. Here each record is written to the file before the step that finished its
game returns, and removed once the archive holds it; a service started again on the same
files finds what was left and archives it.

A file of its own, next to the archive's (``archive.db`` -> ``archive.db.outbox``), not a
table in it: a write here waits for no archive transaction, so a step never waits on the
archiver's lock. Written in WAL mode with ``synchronous=NORMAL``: a committed record is in
the operating system's hands, which a killed process cannot take back (a power cut can
lose the last ones; a machine that must survive that runs Redis with its append-only file).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

REMOVED_AT_ONCE = 500
"""Tokens per DELETE (SQLite binds at most 32,766 parameters a statement)."""
SCHEMA = "CREATE TABLE IF NOT EXISTS backlog (token INTEGER PRIMARY KEY, record BLOB NOT NULL)"


class Outbox:
    """Records waiting for the archive, by token, in the SQLite file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SCHEMA)

    def records(self) -> list[tuple[int, bytes]]:
        """What a previous process left, oldest first."""
        return self._db.execute("SELECT token, record FROM backlog ORDER BY token").fetchall()

    def add(self, token: int, record: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO backlog VALUES (?, ?)", (token, record))

    def remove(self, tokens: Sequence[int]) -> None:
        for start in range(0, len(tokens), REMOVED_AT_ONCE):
            chunk = tokens[start : start + REMOVED_AT_ONCE]
            marks = ",".join("?" * len(chunk))
            self._db.execute(f"DELETE FROM backlog WHERE token IN ({marks})", chunk)

    def close(self) -> None:
        self._db.close()


def outbox_path(database_url: str) -> Path | None:
    """Where the outbox of an archive at ``database_url`` lives: next to a SQLite file;
    None for any other database, or a SQLite database in memory."""
    prefix = "sqlite:///"
    if not database_url.startswith(prefix):
        return None
    path = database_url.removeprefix(prefix).split("?", 1)[0]
    if path in ("", ":memory:"):
        return None
    return Path(f"{path}.outbox")
