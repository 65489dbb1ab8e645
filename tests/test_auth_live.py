"""Keys, rate limits and quotas against a real ``wander serve`` on Redis: what
only a real server shows (WebSocket handshakes, one client's flood next to another's
steps, Redis memory), and what ``wander serve`` says at start."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis
import websockets
from websockets.exceptions import InvalidStatus

from tests.helpers import error_of
from wander.service.archive import Archive, KeyBook
from wander.service.archive.migrations import upgrade
from wander.service.tenancy import Role
from wander.testing import FLOOD, ServiceProcess

FLOOD_SECONDS = 2.0


@dataclass
class Keys:
    flood: str
    """An agent of tenant ``flood``, limited to 20 requests a second."""
    calm: str
    """A trainer of tenant ``calm``, with its role's defaults (2,000 requests a second)."""
    hoard: str
    """A trainer of tenant ``hoard`` with small live-episode and metadata quotas."""
    revoked: str
    revoked_id: str


@pytest.fixture
def keys(sqlite_url: str) -> Keys:
    upgrade(sqlite_url)
    archive = Archive(sqlite_url)
    try:
        book = KeyBook(archive)
        _, flood = book.create("flood", Role.agent, quotas={"requests_per_second": 20, "burst": 20})
        _, calm = book.create("calm", Role.trainer)
        _, hoard = book.create(
            "hoard", Role.trainer, quotas={"live_episodes": 400, "metadata_bytes": 4 << 20}
        )
        gone, revoked = book.create("calm", Role.agent, name="to revoke")
    finally:
        archive.dispose()
    return Keys(flood, calm, hoard, revoked, gone.id)


@pytest.fixture
def server(
    keys: Keys, sqlite_url: str, redis_url: str, redis_prefix: str
) -> Iterator[ServiceProcess]:
    process = ServiceProcess(
        {
            "WANDER_DATABASE_URL": sqlite_url,
            "WANDER_REDIS_URL": redis_url,
            "WANDER_REDIS_PREFIX": redis_prefix,
            "WANDER_AUTH": "keys",
            "WANDER_KEY_CACHE_SECONDS": "0.5",
        }
    ).start()
    yield process
    process.stop()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def play_steps(api: httpx.AsyncClient, key: str, steps: int) -> None:
    """``steps`` steps of tic-tac-toe games played one step at a time by ``key``, each
    answered 200."""
    played = 0
    while played < steps:
        created = await api.post("/v1/episodes", json={"env": "tictactoe"}, headers=auth(key))
        assert created.status_code == 201, created.text
        episode_id, done, move = created.json()["episodes"][0]["id"], False, 0
        while not done and played < steps:
            response = await api.post(
                f"/v1/episodes/{episode_id}/step",
                json={"action": f"<move>{move}</move>"},
                headers=auth(key),
            )
            assert response.status_code == 200, response.text
            done, move, played = response.json()["done"], move + 1, played + 1


async def test_a_rate_limited_key_gets_429s_and_leaves_other_tenants_alone(
    server: ServiceProcess, keys: Keys
) -> None:
    """The flood's key is refused past its burst and rate; the calm tenant's steps, sent
    while it floods, are all answered. How much slower they are next to the flood is a
    number for ``python -m bench.timings``, not a bound here."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
        flood = subprocess.Popen(
            [sys.executable, "-c", FLOOD, server.url, keys.flood, str(FLOOD_SECONDS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert flood.stdout is not None
            assert await asyncio.to_thread(flood.stdout.readline) == "flooding\n"
            await asyncio.sleep(0.2)
            await play_steps(api, keys.calm, 50)
            out, _ = flood.communicate(timeout=FLOOD_SECONDS + 30)
        finally:
            flood.kill()
        taken, limited = map(int, out.split())
        for _ in range(100):  # past the refilled burst
            refused = await api.get("/v1/environments/tictactoe", headers=auth(keys.flood))
            if refused.status_code != 200:
                break
    # What the key may spend is its burst and its rate over the flood's time; all the rest
    # must be refused. (How much more than that the flood sends depends on how busy the
    # machine is: the flood's own speed is not the service's to assert.)
    assert taken <= 20 + 20 * (FLOOD_SECONDS + 1)  # burst + rate x time
    assert limited > 0 and taken + limited > 20 + 20 * FLOOD_SECONDS, (taken, limited)
    assert refused.status_code == 429
    assert error_of(refused)["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1


def redis_memory(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("memory")["used_memory"])


async def test_live_episode_and_metadata_quotas_stop_memory_growth(
    server: ServiceProcess, keys: Keys, redis_url: str
) -> None:
    metadata = {"note": "x" * 15_000}
    statuses: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:

        async def create(n: int) -> str:
            response = await api.post(
                "/v1/episodes",
                json={"env": "tictactoe", "n": n, "metadata": metadata},
                headers=auth(keys.hoard),
            )
            if response.status_code == 201:
                return "created"
            assert response.status_code == 429, response.text
            assert "retry-after" not in response.headers
            return str(error_of(response)["details"]["quota"])

        for _ in range(12):  # 4 MiB of metadata is 279 episodes: full by the 2nd or 3rd
            outcome = await create(128)
            statuses[outcome] = statuses.get(outcome, 0) + 1
        assert statuses["metadata_bytes"] >= 9
        full = redis_memory(redis_url)
        for _ in range(50):
            assert await create(128) == "metadata_bytes"
        grown = redis_memory(redis_url) - full
        # Small creates fill the live-episode quota, then stop too.
        for _ in range(30):
            response = await api.post(
                "/v1/episodes", json={"env": "tictactoe", "n": 16}, headers=auth(keys.hoard)
            )
            if response.status_code == 429:
                break
        assert error_of(response)["details"]["quota"] == "live_episodes"
    # 50 refused creates of 128 x 15 KB would have been 96 MB.
    assert grown < 2 << 20, grown


async def test_websocket_sessions_need_a_key_and_see_only_their_tenant(
    server: ServiceProcess, keys: Keys
) -> None:
    ws = server.url.replace("http", "ws") + "/openenv/tictactoe/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(ws):
            pass
    assert refused.value.response.status_code == 401
    # A URL carrying the key (Basic auth), as OpenEnv 0.4's and Verifiers' clients send it.
    with_key = ws.replace("ws://", f"ws://wander:{keys.calm}@")
    async with websockets.connect(with_key) as session:
        await session.send('{"type": "reset", "data": {"seed": 1}}')
        reset = json.loads(await session.recv())
    episode_id = reset["data"]["metadata"]["episode_id"]
    async with websockets.connect(
        f"{ws}?episode_id={episode_id}", additional_headers=auth(keys.flood)
    ) as other:
        await other.send('{"type": "state"}')
        answer = json.loads(await other.recv())
    assert answer["type"] == "error"
    assert answer["data"]["error"]["code"] == "episode_not_found"
    # Nor can a reset frame reattach to it.
    async with websockets.connect(ws, additional_headers=auth(keys.flood)) as other:
        await other.send(json.dumps({"type": "reset", "data": {"episode_id": episode_id}}))
        answer = json.loads(await other.recv())
    assert answer["data"]["error"]["code"] == "episode_not_found"
    # A session is one audit line, written when it closes: it names the episodes it played.
    deadline = time.monotonic() + 10
    while not (sessions := audit_lines(server, "/openenv/{env:path}/ws")):
        assert time.monotonic() < deadline, server.logs()
        await asyncio.sleep(0.05)
    assert sessions[0]["episode_ids"] == [episode_id]
    assert sessions[0]["status"] == 101 and sessions[0]["tenant"] == "calm"


async def test_each_websocket_frame_spends_the_keys_rate_limit(
    server: ServiceProcess, keys: Keys
) -> None:
    """A session is not a way around the limit: each frame is a request, as each HTTP
    step is, and one over the limit is answered with ``rate_limited`` (the session goes on)."""
    ws = server.url.replace("http", "ws") + "/openenv/tictactoe/ws"
    async with websockets.connect(ws, additional_headers=auth(keys.flood)) as session:
        started = time.monotonic()
        for _ in range(40):
            await session.send('{"type": "reset", "data": {"seed": 1}}')
        answers = [json.loads(await session.recv()) for _ in range(40)]
        elapsed = time.monotonic() - started
    codes = [a["data"]["error"]["code"] if a["type"] == "error" else "ok" for a in answers]
    served = codes.count("ok")
    assert set(codes) == {"ok", "rate_limited"}, codes
    assert served <= 20 + 20 * elapsed + 1, (served, elapsed)  # burst + rate x time


def audit_lines(server: ServiceProcess, route: str) -> list[dict[str, object]]:
    """The server's audit lines of ``route`` so far, oldest first."""
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    return [line for line in lines
            if line.get("logger") == "wander.service.audit" and line["route"] == route]  # fmt: skip


async def test_a_revoked_key_is_refused_within_the_cache_time(
    server: ServiceProcess, keys: Keys, sqlite_url: str
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
        assert (await api.get("/v1/environments", headers=auth(keys.revoked))).status_code == 200
        archive = Archive(sqlite_url)
        try:
            assert KeyBook(archive).revoke(keys.revoked_id) is not None
        finally:
            archive.dispose()
        await asyncio.sleep(0.6)
        response = await api.get("/v1/environments", headers=auth(keys.revoked))
        never = await api.get("/v1/environments", headers=auth("wdr_never-issued"))
        missing = await api.get("/v1/environments")
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthorized"
    # docs/api.md: a revoked key reads as one never issued; a missing key says so.
    assert error_of(response)["message"] == error_of(never)["message"]
    assert "unknown or revoked" in error_of(response)["message"]
    assert "needs an API key" in error_of(missing)["message"]


@pytest.mark.parametrize(
    ("host", "keys", "warns"),
    [("0.0.0.0", "", True), ("127.0.0.1", "", False), ("0.0.0.0", "team:admin:k3y", False)],
)
def test_an_open_service_on_a_public_address_warns_loudly(
    sqlite_url: str, host: str, keys: str, warns: bool
) -> None:
    upgrade(sqlite_url)
    process = ServiceProcess(
        {"WANDER_DATABASE_URL": sqlite_url, "WANDER_REDIS_URL": "", "WANDER_API_KEYS": keys},
        ("serve", "--host", host),
    ).start()
    try:
        said = process.logs()
    finally:
        process.stop()
    warning = f"WARNING: no API key is configured and the service listens on {host}"
    assert (warning in said) is warns, said


def test_serve_stops_at_start_on_settings_it_cannot_apply(sqlite_url: str) -> None:
    def serve(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wander", "serve", "--port", "1"],
            env={**os.environ, "WANDER_DATABASE_URL": sqlite_url, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    bad = serve(WANDER_API_KEYS="alpha:agent:s3cret-key,broken")
    assert bad.returncode == 1
    assert "WANDER_API_KEYS entry 2 is not `tenant:role:key`" in bad.stderr
    assert "s3cret" not in bad.stderr + bad.stdout

    upgrade(sqlite_url)
    archive = Archive(sqlite_url)
    try:
        KeyBook(archive).create("alpha", Role.agent)
    finally:
        archive.dispose()
    opened = serve(WANDER_AUTH="open")
    assert opened.returncode == 1
    assert opened.stderr.splitlines()[-1] == (
        "Error: the service will not start: the archive holds 1 active API key(s), but the "
        "service is open: set WANDER_AUTH=keys to require them (or revoke them with "
        "`wander keys revoke`)"
    )
    assert "Traceback" not in opened.stderr
