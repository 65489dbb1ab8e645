"""What a test session must not leave behind, checked when it ends (see tests/conftest.py).

Fixtures clean up after each test; this is the net under them. Everything a session
creates carries its session id, so that two sessions sharing one Redis and one
PostgreSQL (two checkouts, two CI jobs) check only their own:

- processes: every process the session starts inherits ``WANDER_TEST_SESSION`` from
  its environment, so a worker orphaned by its killed supervisor is found too, however
  far down it was started and whoever its parent is now;
- Redis: keys live under ``wander-test:<session>:`` in the suite's database, and a key
  outside ``wander-test:`` that appeared during the session is a key some code wrote
  without its prefix;
- PostgreSQL: databases are named ``wander_test_<session>_...``;
- ports: a server a test ran inside the pytest process (a thread) still listening.

What is surely the session's own (its processes, keys and databases) is removed once
reported, so that a failing run does not leave it behind either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
import redis
import sqlalchemy

from wander.testing import running_processes

MARKER = "WANDER_TEST_SESSION"
"""The environment variable every process of a session inherits: its session id."""

NAMESPACE = "wander-test:"
"""Where every Redis key of every test session lives."""


@dataclass(frozen=True)
class Leak:
    """Something the session left behind, and how to remove it when it is surely ours."""

    what: str
    remove: Callable[[], object] | None = None


@dataclass
class Ledger:
    """What this session may create, and where to look for what it left."""

    session: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    redis_url: str | None = None
    """The Redis the session used, once a test asked for one (and not one it started)."""
    keys_before: set[bytes] = field(default_factory=set)
    """Keys outside the namespace already in the suite's database when it was first used."""
    postgres_url: str | None = None

    @property
    def redis_namespace(self) -> str:
        return f"{NAMESPACE}{self.session}:"

    @property
    def database_prefix(self) -> str:
        return f"wander_test_{self.session}_"

    def use_redis(self, url: str) -> None:
        if self.redis_url is None:
            self.redis_url = url
            self.keys_before = set(_foreign_keys(url))

    def leaks(self) -> list[Leak]:
        """What the session left behind, processes first: removing them first stops a
        leaked service from writing its keys again."""
        return [*_processes(self.session), *_ports(), *self._keys(), *self._databases()]

    def _keys(self) -> list[Leak]:
        if self.redis_url is None:
            return []
        client = redis.Redis.from_url(self.redis_url)
        try:
            ours = sorted(client.scan_iter(match=f"{self.redis_namespace}*"))
            foreign = sorted(set(_foreign_keys(self.redis_url)) - self.keys_before)
        except redis.RedisError as exc:
            return [Leak(f"Redis at {self.redis_url} could not be checked: {exc}")]
        return [
            *(Leak(f"Redis key {key.decode(errors='replace')!r}", partial(client.delete, key))
              for key in ours),
            *(Leak(f"Redis key {key.decode(errors='replace')!r}, outside any test's prefix")
              for key in foreign),
        ]  # fmt: skip

    def _databases(self) -> list[Leak]:
        if self.postgres_url is None:
            return []
        engine = sqlalchemy.create_engine(self.postgres_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                names = connection.execute(sqlalchemy.text("SELECT datname FROM pg_database"))
                ours = sorted(name for (name,) in names if name.startswith(self.database_prefix))
        except sqlalchemy.exc.OperationalError as exc:
            return [Leak(f"PostgreSQL at {self.postgres_url} could not be checked: {exc.orig}")]
        finally:
            engine.dispose()
        return [Leak(f"PostgreSQL database {name!r}", partial(self._drop, name)) for name in ours]

    def _drop(self, database: str) -> None:
        assert self.postgres_url is not None
        engine = sqlalchemy.create_engine(self.postgres_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(sqlalchemy.text(f'DROP DATABASE "{database}" WITH (FORCE)'))
        finally:
            engine.dispose()


LEDGER = pytest.StashKey[Ledger]()


def _foreign_keys(url: str) -> list[bytes]:
    client = redis.Redis.from_url(url)
    return [key for key in client.scan_iter() if not key.startswith(NAMESPACE.encode())]


def _processes(session: str) -> list[Leak]:
    """Running processes started by this session: children of pytest, and any process
    with the session's marker in its environment."""
    if not Path("/proc").is_dir():
        return []
    me, marker = os.getpid(), f"{MARKER}={session}".encode()
    leaked = []
    for process in running_processes():
        if process.pid == me:
            continue
        try:
            environ = Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
        except OSError:  # ended, or not ours to read
            environ = []
        if process.ppid == me or marker in environ:
            what = f"process {process.pid} ({process.command[:120]})"
            leaked.append(Leak(what, partial(_kill, process.pid)))
    return leaked


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _ports() -> list[Leak]:
    """TCP ports the pytest process itself still listens on (they close when it exits)."""
    if not Path("/proc").is_dir():
        return []
    sockets = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target[len("socket:[") : -1])
    leaked = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in sockets:  # 0A: LISTEN
                port = int(local.rsplit(":", 1)[1], 16)
                leaked.append(Leak(f"a listening socket on port {port}"))
    return leaked
