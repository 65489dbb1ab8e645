"""Environment code runs outside the event loop, under limits (issue #20, service/sandbox).

A real ``wander serve`` with a 2-second deadline: answers that would compute for
minutes (``9**9**9``) fail alone with ``env_timeout`` while another client's
tic-tac-toe steps keep flowing; a worker killed mid-call fails that call with
``env_failed`` and is replaced; workers run as ``nobody`` in a network namespace of
their own, with no secret in their environment and rlimits on memory, files and
processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from tests.helpers import LIGHT_P99_BOUND, light_client, p99, workers_of
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import ServiceProcess

DEADLINE = 2.0
MEMORY = 768 << 20


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    database = f"sqlite:///{tmp_path_factory.mktemp('sandbox')}/archive.db"
    upgrade(database)
    process = ServiceProcess(
        {
            "WANDER_DATABASE_URL": database,
            "WANDER_REDIS_URL": "",
            "WANDER_ENV_CALL_SECONDS": str(DEADLINE),
            "WANDER_ENV_MEMORY_BYTES": str(MEMORY),
        }
    ).start()
    yield process
    process.stop()


async def answer(client: httpx.AsyncClient, env: str, text: str) -> httpx.Response:
    created = await client.post("/v1/episodes", json={"env": env, "example": 0})
    assert created.status_code == 201, created.text
    episode = created.json()["episodes"][0]["id"]
    return await client.post(
        f"/v1/episodes/{episode}/step", json={"action": f"<answer>{text}</answer>"}
    )


async def test_answers_that_never_end_time_out_while_others_are_served(
    client: httpx.AsyncClient,
) -> None:
    warm = await answer(client, "rg/spiral_matrix", "1 2 3")  # workers started, not timed
    assert warm.status_code == 200, warm.text
    stop = asyncio.Event()
    light = asyncio.create_task(light_client(client, stop))
    bombs = [
        ("rg/spiral_matrix", "9**9**9"),
        ("rg/polynomial_multiplication", "9**9**9"),
        ("rg/countdown", "9**9**9"),
    ]
    started = time.perf_counter()
    responses = await asyncio.gather(*(answer(client, env, text) for env, text in bombs))
    elapsed = time.perf_counter() - started
    health = await client.get("/readyz")
    stop.set()
    latencies = await light
    for response in responses:
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "env_timeout"
    # Two workers: the third bomb waits for one, then has its own deadline (and the
    # replacement worker's start); each is stopped, none runs on.
    assert elapsed < 3 * DEADLINE + 20
    assert health.status_code == 200
    slowest = p99(latencies)
    print(f"light client during the attack: {len(latencies)} requests, p99 {slowest * 1000:.1f} ms")
    assert len(latencies) > 20 and slowest < LIGHT_P99_BOUND


async def test_huge_numbers_get_an_answer_within_the_deadline(client: httpx.AsyncClient) -> None:
    """``1e999999999`` is infinity to ``float`` and a huge ``Fraction``/sympy number to
    the scorers that parse exactly: either a normal (wrong) answer or env_timeout."""
    for env in ("rg/spiral_matrix", "rg/countdown", "rg/puzzle24"):
        started = time.perf_counter()
        response = await answer(client, env, "1e999999999")
        assert time.perf_counter() - started < DEADLINE + 15  # a worker's start included
        if response.status_code == 200:
            assert response.json()["reward"] < 1
        else:
            assert response.status_code == 422, response.text
            assert response.json()["error"]["code"] == "env_timeout"


async def test_a_killed_worker_fails_its_call_alone_and_is_replaced(
    client: httpx.AsyncClient, service: ServiceProcess
) -> None:
    assert service.process is not None
    warm = await answer(client, "rg/spiral_matrix", "1 2 3")
    assert warm.status_code == 200
    before = set(workers_of(service.process.pid))
    bomb = asyncio.create_task(answer(client, "rg/spiral_matrix", "9**9**9"))
    await asyncio.sleep(0.5)  # the worker is computing
    for pid in before:  # kill them all: the busy one is among them
        os.kill(pid, signal.SIGKILL)
    response = await bomb
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "env_failed"
    after = await answer(client, "rg/spiral_matrix", "1 2 3")
    assert after.status_code == 200, after.text
    assert not set(workers_of(service.process.pid)) & before


async def test_workers_are_unprivileged(client: httpx.AsyncClient, service: ServiceProcess) -> None:
    assert service.process is not None
    warm = await answer(client, "rg/spiral_matrix", "1 2 3")
    assert warm.status_code == 200
    [worker, *_] = workers_of(service.process.pid)
    proc = Path(f"/proc/{worker}")
    environment = (proc / "environ").read_bytes().split(b"\0")
    assert not [v for v in environment if v.startswith(b"WANDER_")], environment
    limits = (proc / "limits").read_text()
    assert _limit(limits, "Max address space") == str(MEMORY)
    assert _limit(limits, "Max file size") == "0"
    assert _limit(limits, "Max open files") == "64"
    assert Path(os.readlink(proc / "cwd")).name.startswith("wander-env-")
    if os.geteuid() == 0:  # the layers that need root to set up
        uids = (proc / "status").read_text().split("Uid:")[1].split()[:4]
        assert set(uids) == {"65534"}  # nobody: real, effective, saved and filesystem
        assert _limit(limits, "Max processes") == "0"
        assert os.readlink(proc / "ns/net") != os.readlink("/proc/self/ns/net")
        seen = proc / "root"  # the worker's file system, as the worker sees it
        archive = service.env["WANDER_DATABASE_URL"].removeprefix("sqlite:///")
        assert Path(archive).is_file() and not (seen / archive.lstrip("/")).exists()
        assert not {"etc", "home", "proc", "var", "opt"} & set(os.listdir(seen))
        if sys.base_prefix.startswith("/root/"):  # an interpreter in root's home: only it
            assert os.listdir(seen / "root") == [sys.base_prefix.split("/")[2]]
        assert (seen / "usr/lib").is_dir() and (seen / "dev/null").exists()


def _limit(limits: str, name: str) -> str:
    line = next(line for line in limits.splitlines() if line.startswith(name))
    return line[len(name) :].split()[0]


async def test_stopping_the_service_stops_its_workers(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/archive.db"
    upgrade(database)
    app = create_app(Settings(redis_url=None, database_url=database))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://wander.test") as api:
            response = await answer(api, "rg/spiral_matrix", "1 2 3")
            assert response.status_code == 200, response.text
            workers = workers_of(os.getpid())
            assert workers
    assert not set(workers_of(os.getpid())) & set(workers)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


async def test_a_call_that_finds_every_worker_busy_too_long_is_refused_503(
    tmp_path: Path,
) -> None:
    """One worker, held by an answer that computes until its deadline: another call
    waits at most WANDER_ENV_WAIT_SECONDS, then gets 503 env_busy (retried by clients)."""
    database = f"sqlite:///{tmp_path}/archive.db"
    upgrade(database)
    settings = Settings(
        redis_url=None, database_url=database, env_workers=1, env_call_seconds=DEADLINE,
        env_wait_seconds=0.3,
    )  # fmt: skip
    async with LifespanManager(create_app(settings)) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://wander.test") as api:
            created = await api.post("/v1/episodes", json={"env": "rg/spiral_matrix", "n": 2})
            first, second = (episode["id"] for episode in created.json()["episodes"])

            async def step(episode: str, text: str) -> httpx.Response:
                action = {"action": f"<answer>{text}</answer>"}
                return await api.post(f"/v1/episodes/{episode}/step", json=action)

            endless = asyncio.create_task(step(first, "9**9**9"))
            await asyncio.sleep(0.5)
            refused = await step(second, "1 2 3")
            assert (await endless).json()["error"]["code"] == "env_timeout"
            after = await step(second, "1 2 3")
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "env_busy"
    assert refused.headers["retry-after"] == "1"
    assert after.status_code == 200, after.text
