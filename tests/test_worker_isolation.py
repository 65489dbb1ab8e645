"""A worker that runs an attacker's code reaches no one else (the security issue's items
3 and 4): a real keyed ``wander serve`` with two tenants and the test plugin, whose
``hostile`` environment does inside its worker what its action says, as code an attacker
got running there would (a plugin's hole).

- a worker serves one call: one that keeps answering the service's calls itself
  (``stay``) answers no later call, of its tenant or another, and reads none;
- it is pid 1 of a pid namespace of its own, as a uid of its own: it can signal no other
  worker (``signal``), and two live workers never share a uid (``pid``);
- its working directory is a ``tmpfs`` capped in inodes: a million directories cost
  the machine 500 MB of kernel memory no rlimit counts (``mkdir``);
- one tenant that keeps every worker busy with calls that run to their deadline cannot
  make another tenant's calls wait behind all of them, or fail ``env_busy``;
- it can start no process, write no file and reach no loopback; granted processes
  (``WANDER_ENV_PROCESSES``: a hosted taskset's tool servers), it can do all three, yet
  still reaches nothing of the service's network, and what it started dies with it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.helpers import plugin_service
from wander.service.envs import Registry
from wander.service.sandbox.fairness import FairSlots
from wander.service.sandbox.launcher import worker_environment
from wander.testing import ServiceProcess, wait_until

DEADLINE = 1.5
UIDS = range(100000, 165536)
"""The default ``WANDER_ENV_UIDS``."""
KEYS = {"t1": "wdr_t1-isolation-test-key", "t2": "wdr_t2-isolation-test-key"}
SLACK = 0.75
"""Seconds a step may take past what the test allows it, on a shared 2-core machine."""
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and uids need root")


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    keys = ",".join(f"{tenant}:trainer:{key}" for tenant, key in KEYS.items())
    with plugin_service(
        plugin_site, tmp_path_factory.mktemp("isolation"), WANDER_API_KEYS=keys,
        WANDER_ENV_CALL_SECONDS=str(DEADLINE), WANDER_ENV_WORKERS="2",
    ) as process:  # fmt: skip
        yield process


@pytest.fixture
async def tenants(service: ServiceProcess) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """A client of each tenant, with its key."""
    clients = {
        tenant: httpx.AsyncClient(
            base_url=service.url, timeout=60, headers={"Authorization": f"Bearer {key}"}
        )
        for tenant, key in KEYS.items()
    }
    yield clients
    for client in clients.values():
        await client.aclose()


async def create(client: httpx.AsyncClient, env: str = "hostile", **body: object) -> list[str]:
    created = await client.post("/v1/episodes", json={"env": env, "example": 0, **body})
    assert created.status_code == 201, created.text
    return [episode["id"] for episode in created.json()["episodes"]]


async def step(client: httpx.AsyncClient, episode: str, action: str) -> httpx.Response:
    return await client.post(f"/v1/episodes/{episode}/step", json={"action": action})


async def play(client: httpx.AsyncClient, action: str) -> httpx.Response:
    """A new ``hostile`` episode, and one step of ``action``."""
    [episode] = await create(client)
    return await step(client, episode, action)


def said(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    text: str = response.json()["info"]["said"]
    return text


async def test_a_worker_that_stays_serves_no_later_call(
    tenants: dict[str, httpx.AsyncClient],
) -> None:
    t1, t2 = tenants["t1"], tenants["t2"]
    assert said(await play(t1, "stay")) == "stayed"  # its own call: a forged reply, believed
    for number in range(4):  # the two workers ready now, and the ones forked after them
        assert said(await play(t2, f"t2-secret-{number}")) == f"t2-secret-{number}"
    rg = Registry.from_entry_points()["rg/basic_arithmetic"]
    answer = rg.entry(rg.Config(), "train", 0)["answer"]
    [episode] = await create(t2, "rg/basic_arithmetic", split="train")
    scored = await step(t2, episode, f"<answer>{answer}</answer>")
    assert scored.status_code == 200, scored.text
    score = (await t2.get(f"/v1/episodes/{episode}/score")).json()
    assert score["components"] == {"correct": 1.0, "format": 1.0}
    later = await play(t1, "hello")
    assert said(later) == "hello"
    assert "t2-secret" not in later.text


@root_only
async def test_a_worker_can_signal_no_other(tenants: dict[str, httpx.AsyncClient]) -> None:
    """``kill(-1, SIGKILL)`` in t1's worker while t2's calls run in others."""
    t1, t2 = tenants["t1"], tenants["t2"]
    signalled = asyncio.Event()

    async def calls(loop: int) -> list[tuple[str, httpx.Response]]:
        played = []
        while not signalled.is_set() or len(played) < 5:
            action = f"t2-{loop}-{len(played)}"
            played.append((action, await play(t2, action)))
        return played

    loops = [asyncio.create_task(calls(loop)) for loop in range(2)]
    await asyncio.sleep(0.3)
    signal = await play(t1, "signal")
    signalled.set()
    played = [call for loop in await asyncio.gather(*loops) for call in loop]
    assert said(signal) == "killed none (ProcessLookupError)"
    assert [said(response) for _, response in played] == [action for action, _ in played]


@root_only
async def test_each_worker_is_pid_1_as_a_uid_of_its_own(
    tenants: dict[str, httpx.AsyncClient],
) -> None:
    first, second = await asyncio.gather(
        play(tenants["t1"], "pid 0.5"), play(tenants["t2"], "pid 0.5")
    )  # both alive at once
    [pid_1, uid_1], [pid_2, uid_2] = said(first).split(), said(second).split()
    assert pid_1 == pid_2 == "1"
    assert int(uid_1) in UIDS and int(uid_2) in UIDS and uid_1 != uid_2


def processes_of(uid: int) -> list[int]:
    """The pids of the processes running as ``uid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except FileNotFoundError:
                continue
    return pids


@root_only
async def test_only_a_worker_granted_processes_starts_them_and_they_die_with_it(
    tenants: dict[str, httpx.AsyncClient], plugin_site: Path, tmp_path: Path, redis_url: str
) -> None:
    redis_port = urlsplit(redis_url).port or 6379  # listening on the service's loopback
    denied = json.loads(said(await play(tenants["t1"], f"probe {redis_port}")))
    assert denied["process"] == denied["orphan"] == "BlockingIOError"  # RLIMIT_NPROC 0
    assert denied["file"] == "OSError"  # a read-only /tmp, and RLIMIT_FSIZE 0
    assert denied["loopback"] == denied["service"] == "OSError"  # no network: lo is down
    with plugin_service(plugin_site, tmp_path, WANDER_ENV_PROCESSES="hostile") as granted:
        async with httpx.AsyncClient(base_url=granted.url, timeout=60) as client:
            probe = json.loads(said(await play(client, f"probe {redis_port}")))
    assert (probe["process"], probe["file"], probe["loopback"]) == ("7", "100000", "connected")
    assert probe["service"] == "ConnectionRefusedError"  # a network of its own
    assert probe["orphan"].isdigit()
    uid = int(probe["uid"])
    assert uid in UIDS
    wait_until(lambda: not processes_of(uid), "the worker's processes ended with it")


def unreclaimable_kb() -> int:
    meminfo = Path("/proc/meminfo").read_text()
    line = next(line for line in meminfo.splitlines() if line.startswith("SUnreclaim:"))
    return int(line.split()[1])


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


@root_only
async def test_a_directory_flood_is_capped(
    tenants: dict[str, httpx.AsyncClient], service: ServiceProcess
) -> None:
    assert service.process is not None
    await play(tenants["t1"], "hello")  # the fork server and the workers exist
    before, service_before = unreclaimable_kb(), rss_kb(service.process.pid)
    flood = asyncio.create_task(play(tenants["t1"], "mkdir"))
    peak = before
    while not flood.done():
        peak = max(peak, unreclaimable_kb())
        await asyncio.sleep(0.01)
    response = await flood
    print(f"SUnreclaim {before} kB before, {peak} kB at the most during the flood")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] in ("env_error", "env_failed")
    assert peak - before < 16 << 10
    assert rss_kb(service.process.pid) - service_before < 16 << 10


async def test_slots_go_to_tenants_in_turn_each_within_its_share() -> None:
    """The pool's queue alone: one slot, three tenants that queued three calls each in a
    row are served in turn; then two slots, one tenant holding both with calls waiting:
    the first slot to come free goes to a tenant that arrives, not to the holder."""
    slots = FairSlots(1)
    assert await slots.acquire("x", 1)
    served: list[str] = []

    async def call(tenant: str) -> None:
        assert await slots.acquire(tenant, 5)
        served.append(tenant)
        await asyncio.sleep(0)
        slots.release(tenant)

    calls = [asyncio.create_task(call(t)) for t in ("a", "a", "a", "b", "b", "b", "c", "c", "c")]
    await asyncio.sleep(0)
    slots.release("x")
    await asyncio.gather(*calls)
    assert served == ["a", "b", "c"] * 3

    slots = FairSlots(2)
    assert await slots.acquire("hog", 1) and await slots.acquire("hog", 1)
    queued = [asyncio.create_task(slots.acquire("hog", 5)) for _ in range(3)]
    newcomer = asyncio.create_task(slots.acquire("new", 5))
    await asyncio.sleep(0)
    assert slots.share() == 1
    slots.release("hog")
    await asyncio.sleep(0)
    assert newcomer.done() and not any(q.done() for q in queued)
    slots.release("new")  # no other tenant waits: the hog may use every slot again
    await asyncio.sleep(0)
    assert sum(q.done() for q in queued) == 1
    assert not await slots.acquire("late", 0.05)  # no slot within its wait: env_busy
    for q in queued:
        q.cancel()


async def test_one_tenant_cannot_starve_another(tenants: dict[str, httpx.AsyncClient]) -> None:
    """t1 keeps both workers busy with calls that spin to their deadline, four at a time
    (two running, two waiting); t2's steps each wait at most for one of them to end."""
    t1, t2 = tenants["t1"], tenants["t2"]
    episodes = await create(t2, n=9)

    async def timed(episode: str) -> tuple[float, httpx.Response]:
        started = time.perf_counter()
        response = await step(t2, episode, "hello")
        return time.perf_counter() - started, response

    unloaded = [await timed(episode) for episode in episodes[:4]]
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            response = await play(t1, "spin")
            assert response.status_code == 422, response.text
            assert response.json()["error"]["code"] == "env_timeout"

    hogs = [asyncio.create_task(hog()) for _ in range(4)]
    await asyncio.sleep(DEADLINE / 2)  # both workers spin, t1's next calls wait
    loaded = [await timed(episode) for episode in episodes[4:]]
    stop.set()
    await asyncio.gather(*hogs)
    for _, response in unloaded + loaded:
        assert said(response) == "hello"  # none env_busy
    alone = max(took for took, _ in unloaded)
    slowest = max(took for took, _ in loaded)
    print(
        f"t2's steps alone: median {statistics.median(t for t, _ in unloaded) * 1e3:.0f} ms, "
        f"slowest {alone * 1e3:.0f} ms; while t1 saturates the workers: median "
        f"{statistics.median(t for t, _ in loaded) * 1e3:.0f} ms, slowest "
        f"{slowest * 1e3:.0f} ms; env_busy: 0"
    )
    assert slowest < alone + DEADLINE + SLACK


def test_the_fork_server_gets_only_harmless_variables_with_paths_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It runs in a folder of its own: a relative PYTHONPATH entry (`PYTHONPATH=.`, where a
    hosted environment's module lies) is resolved where the service was started."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f".{os.pathsep}/opt/lib{os.pathsep}")
    monkeypatch.setenv("WANDER_OPENENV", "guess=my_envs:GuessNumber")
    monkeypatch.setenv("WANDER_DATABASE_URL", "postgresql://u:secret@db/w")
    given = worker_environment(tmp_path / "server")
    assert given["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/opt/lib"
    assert given["WANDER_OPENENV"] == "guess=my_envs:GuessNumber"
    assert "WANDER_DATABASE_URL" not in given
