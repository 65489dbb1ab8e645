"""What isolating each call in a worker of its own costs: ``python -m bench.isolation``.

A trivial call (the ``rescore`` of a new ``sql`` episode; ``sql`` is pure parsing, so
its worker may also be reused) through the service's ``WorkerPool``, one at a time:

- **reused worker**: one worker answers call after call (what every call got before
  workers served one call each; what a pure-parsing environment's calls still get);
- **fresh pre-forked worker**: each call takes a worker that the fork server forked,
  and that confined itself, ahead of the call, and the worker is killed after it;
- **back to back**: without waiting, so fresh workers are as many a second as the
  fork server sustains; **once the pool is full**: each call waits (untimed) until
  the pool has all its workers ready again: a pool kept warm; **paced**: the same and
  at least ``GAP``, so that the machine idles between calls; **while the pool has one
  ready**: waits only when none is.

Then the fork server alone: workers forked, confined and killed per second, asked by
one task, then by two. Prints a table (milliseconds per call).

``--fair``: the fair-share figure instead. A real ``wander serve`` with two tenants'
keys and the test plugin (``tests/plugin``, installed in a temporary folder): tenant
``a`` keeps ``--hogs`` calls that spin to their deadline in flight, tenant ``b`` steps
episodes one after the other, first alone, then while ``a`` saturates the workers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from wander.service.archive.migrations import upgrade
from wander.service.envs import Registry
from wander.service.sandbox.launcher import ForkServer
from wander.service.sandbox.pool import WorkerPool
from wander.service.sandbox.replies import checked
from wander.service.settings import Settings
from wander.testing import ServiceProcess

ENV = "sql"
GAP = 0.02
"""Between two paced calls: more than a worker takes to be forked and confined."""
PLUGIN = Path(__file__).resolve().parents[1] / "tests" / "plugin"
DEADLINE = 1.5
"""Of each call, in the fair-share run."""


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def _calls(pool: WorkerPool, request: dict[str, Any], check: Any, calls: int,
                 reuse: bool, pacing: str) -> tuple[list[float], float]:  # fmt: skip
    latencies = []
    started = time.perf_counter()
    for _ in range(calls):
        if pacing in ("paced", "full") or (pacing == "one ready" and not pool.ready_workers):
            began = time.perf_counter()  # until the pool is full again (and GAP, paced)
            gap = GAP if pacing == "paced" else 0
            while pool.ready_workers < pool.ready_target or time.perf_counter() < began + gap:
                await asyncio.sleep(0)
        began = time.perf_counter()
        await pool.call(request, check, tenant="bench", reuse=reuse)
        latencies.append(time.perf_counter() - began)
    return latencies, time.perf_counter() - started


async def _forks(server: ForkServer, seconds: float, tasks: int) -> float:
    """Workers forked, made ready and killed per second, by ``tasks`` askers."""
    made = 0
    deadline = time.perf_counter() + seconds

    async def ask() -> None:
        nonlocal made
        while time.perf_counter() < deadline:
            worker = await server.fork()
            await worker.ready()
            worker.kill()
            made += 1

    started = time.perf_counter()
    await asyncio.gather(*(ask() for _ in range(tasks)))
    return made / (time.perf_counter() - started)


async def isolation(calls: int, seconds: float) -> None:
    settings = Settings(redis_url=None)
    env = Registry.from_entry_points()[ENV]
    config = env.Config().model_dump(mode="json")
    pool = WorkerPool(
        settings.env_workers, settings.env_call_seconds, settings.env_memory_bytes,
        settings.env_wait_seconds, settings.max_episode_bytes, settings.env_uids,
    )  # fmt: skip
    try:
        start = {"op": "start", "env": ENV, "config": config, "split": "train", "index": 0,
                 "seed": 1}  # fmt: skip
        state = (await pool.call(start, partial(checked, "start", env)))["state"]
        request = {"op": "rescore", "env": ENV, "config": config, "state": state}
        check = partial(checked, "rescore", env)
        await _calls(pool, request, check, 50, reuse=False, pacing="paced")  # warm up
        print(f"{platform.machine()}, {os.cpu_count()} cores, root: {os.geteuid() == 0}, "
              f"{settings.env_workers} workers")  # fmt: skip
        print("| worker per call | calls | median ms | p99 ms | calls/s |\n|---|---|---|---|---|")
        for name, reuse, pacing in [
            ("reused worker, back to back", True, "back to back"),
            ("reused worker, paced", True, "paced"),
            ("fresh pre-forked worker, once the pool is full", False, "full"),
            ("fresh pre-forked worker, paced", False, "paced"),
            ("fresh pre-forked worker, back to back while one is ready", False, "one ready"),
            ("fresh worker, back to back", False, "back to back"),
        ]:
            latencies, took = await _calls(pool, request, check, calls, reuse, pacing)
            print(f"| {name} | {calls} | {statistics.median(latencies) * 1e3:.3f} | "
                  f"{_quantile(latencies, 0.99) * 1e3:.3f} | {calls / took:,.0f} |")  # fmt: skip
        server = await pool._fork_server()  # the pool's own
        for tasks in (1, 2):
            rate = await _forks(server, seconds, tasks)
            print(f"fork server, {tasks} asking: {rate:,.0f} workers/s (forked, confined, killed)")
    finally:
        await pool.aclose()


async def fair_share(steps: int, hogs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-isolation-"))
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
               str(folder / "site"), str(PLUGIN)]  # fmt: skip
    subprocess.run(install, check=True)
    database = f"sqlite:///{folder}/archive.db"
    upgrade(database)
    keys = {"a": "wdr_bench-tenant-a", "b": "wdr_bench-tenant-b"}
    service = ServiceProcess({
        "PYTHONPATH": str(folder / "site"), "WANDER_DATABASE_URL": database,
        "WANDER_REDIS_URL": "", "WANDER_ENV_CALL_SECONDS": str(DEADLINE), "TMPDIR": str(folder),
        "WANDER_API_KEYS": ",".join(f"{tenant}:trainer:{key}" for tenant, key in keys.items()),
    }).start()  # fmt: skip
    clients = {tenant: httpx.AsyncClient(base_url=service.url, timeout=120,
                                         headers={"Authorization": f"Bearer {key}"})
               for tenant, key in keys.items()}  # fmt: skip
    try:
        a, b = clients["a"], clients["b"]
        created = await b.post("/v1/episodes", json={"env": "hostile", "n": 2 * steps})
        episodes = [episode["id"] for episode in created.json()["episodes"]]

        async def timed(episode: str) -> tuple[float, int]:
            began = time.perf_counter()
            response = await b.post(f"/v1/episodes/{episode}/step", json={"action": "hi"})
            return time.perf_counter() - began, response.status_code

        alone = [await timed(episode) for episode in episodes[:steps]]
        stop = asyncio.Event()

        async def hog() -> None:
            while not stop.is_set():
                made = await a.post("/v1/episodes", json={"env": "hostile"})
                if made.status_code == 201:
                    episode = made.json()["episodes"][0]["id"]
                    await a.post(f"/v1/episodes/{episode}/step", json={"action": "spin"})

        running = [asyncio.create_task(hog()) for _ in range(hogs)]
        await asyncio.sleep(DEADLINE)
        loaded = [await timed(episode) for episode in episodes[steps:]]
        stop.set()
        await asyncio.gather(*running)
        print("| b's steps | steps | p50 ms | p99 ms | 200 | env_busy |\n|---|---|---|---|---|---|")
        for name, rows in (("alone", alone), (f"while a saturates ({hogs} at a time)", loaded)):
            took = [seconds for seconds, _ in rows]
            codes = [code for _, code in rows]
            p50, p99 = _quantile(took, 0.5) * 1e3, _quantile(took, 0.99) * 1e3
            print(f"| {name} | {len(rows)} | {p50:,.0f} | {p99:,.0f} | {codes.count(200)} | "
                  f"{codes.count(503)} |")  # fmt: skip
    finally:
        for client in clients.values():
            await client.aclose()
        service.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0, help="of each fork-rate run")
    parser.add_argument("--fair", action="store_true", help="the fair-share figure instead")
    parser.add_argument("--steps", type=int, default=30, help="of tenant b, each way (--fair)")
    parser.add_argument("--hogs", type=int, default=8, help="tenant a's calls in flight (--fair)")
    arguments = parser.parse_args()
    if arguments.fair:
        asyncio.run(fair_share(arguments.steps, arguments.hogs))
    else:
        asyncio.run(isolation(arguments.calls, arguments.seconds))
