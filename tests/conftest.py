"""Shared fixtures: a real Redis (the machine's, or one started for the suite), the
service over FastAPI's ASGI transport on either store, and small agents."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis
from asgi_lifespan import LifespanManager

from service.app import create_app
from service.settings import Settings

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The Redis to test against: ``WANDER_TEST_REDIS_URL``, the local one, or one we start.

    Skips (saying why) only when none answers and no ``redis-server`` is installed.
    """
    url = os.environ.get("WANDER_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if _redis_answers(url):
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(f"no Redis at {url} and no redis-server to start: Redis tests skipped")
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while not _redis_answers(url):
        if time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"started redis-server on port {port}, but it never answered")
        time.sleep(0.05)
    yield url
    server.terminate()
    server.wait()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own, deleted afterwards."""
    prefix = f"wander-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


@pytest.fixture(params=["memory", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(store_kind: str, request: pytest.FixtureRequest) -> Settings:
    if store_kind == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")
        return Settings(redis_url=url, redis_prefix=prefix)
    return Settings(redis_url=None)


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the service on the parametrised store."""
    app = create_app(settings)
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://wander.test"
        ) as client,
    ):
        yield client
