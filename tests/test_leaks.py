"""The suite fails when a test leaves something behind (tests/leaks.py), and passes when
it cleans up, even after a ``kill -9`` of a service with several workers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy

from wander.testing import running_processes

ROOT = Path(__file__).parent.parent

LEAKY = """
import socket
import subprocess
from pathlib import Path

import redis
import sqlalchemy

from tests.leaks import LEDGER

LEFT = Path(__file__).parent  # where the outer test finds what to clean up
LISTENING = []


def test_leaves_everything_behind(redis_url, postgres_server_url, request):
    ledger = request.config.stash[LEDGER]
    orphan = subprocess.run(
        ["sh", "-c", "sleep 300 > /dev/null 2>&1 & echo $!"], capture_output=True, text=True
    )  # the shell exits at once: the sleep lives on, its parent gone, as a worker would
    (LEFT / "pid").write_text(orphan.stdout.strip())
    keys = [f"{ledger.redis_namespace}stray", f"wander:stray-{ledger.session}"]
    (LEFT / "keys").write_text(" ".join(keys))  # the second outside any prefix
    for key in keys:
        redis.Redis.from_url(redis_url).set(key, 1)
    database = f"{ledger.database_prefix}stray"
    (LEFT / "database").write_text(database)
    admin = sqlalchemy.create_engine(postgres_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    server = socket.create_server(("127.0.0.1", 0))  # closed only when the session exits
    LISTENING.append(server)
    (LEFT / "port").write_text(str(server.getsockname()[1]))
"""

TIDY = """
import httpx
import redis
from wander.testing import ServiceProcess, running_processes


def test_cleans_up(redis_url, redis_prefix, postgresql_url):
    redis.Redis.from_url(redis_url).set(f"{redis_prefix}episode", 1)
    env = {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": redis_prefix,
           "WANDER_DATABASE_URL": postgresql_url}
    server = ServiceProcess(env, command=("serve", "--workers", "2")).start()
    group = server.process.pid
    try:
        assert httpx.post(f"{server.url}/v1/episodes", json={"env": "tictactoe"}).is_success
    finally:
        server.kill()  # the supervisor and its workers: none may outlive it
    # (not its port: another test process may bind it again at once)
    assert not [p for p in running_processes() if p.pgid == group]
"""


def run_session(
    folder: Path, test: str, redis_url: str, postgres_url: str
) -> subprocess.CompletedProcess[str]:
    """``test`` run by pytest in a process of its own, with this suite's conftest and
    this session's Redis and PostgreSQL."""
    (folder / "test_it.py").write_text(test)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", f"--basetemp={folder / 'tmp'}", str(folder / "test_it.py")],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), "WANDER_TEST_REDIS_URL": redis_url,
             "WANDER_TEST_POSTGRES_URL": postgres_url},
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def databases(server_url: str) -> list[str]:
    engine = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            return list(connection.scalars(sqlalchemy.text("SELECT datname FROM pg_database")))
    finally:
        engine.dispose()


@pytest.fixture
def left(tmp_path: Path, redis_url: str, postgres_server_url: str) -> Iterator[Path]:
    """A folder the leaky session writes what it left into; whatever the session did not
    remove itself is removed afterwards."""
    yield tmp_path
    if (tmp_path / "pid").exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)
    if (tmp_path / "keys").exists():
        redis.Redis.from_url(redis_url).delete(*(tmp_path / "keys").read_text().split())
    if (tmp_path / "database").exists():
        admin = sqlalchemy.create_engine(postgres_server_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            name = (tmp_path / "database").read_text()
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_a_session_that_leaves_things_behind_fails_naming_and_removing_them(
    left: Path, redis_url: str, postgres_server_url: str
) -> None:
    result = run_session(left, LEAKY, redis_url, postgres_server_url)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    report = result.stdout.split("the test session left these behind", 1)[1]
    pid = (left / "pid").read_text()
    key, foreign = (left / "keys").read_text().split()
    database = (left / "database").read_text()
    port = (left / "port").read_text()
    assert f"process {pid} (sleep 300)" in report
    assert f"a listening socket on port {port}" in report
    assert f"Redis key '{key}'" in report
    assert f"Redis key '{foreign}', outside any test's prefix" in report
    assert f"PostgreSQL database '{database}'" in report
    # What is surely the session's is gone; a key outside its namespace is only named.
    assert int(pid) not in {process.pid for process in running_processes()}
    client = redis.Redis.from_url(redis_url)
    assert (client.exists(key), client.exists(foreign)) == (0, 1)
    assert database not in databases(postgres_server_url)


def test_a_session_that_cleans_up_after_a_kill_9_of_several_workers_passes(
    tmp_path: Path, redis_url: str, postgres_server_url: str
) -> None:
    result = run_session(tmp_path, TIDY, redis_url, postgres_server_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "left these behind" not in result.stdout
