"""Closed-loop load generator: K agents play tic-tac-toe against a Wander service.

Each agent plays random legal moves, game after game, for a fixed time, through
either the single-step endpoint or the batch endpoint (B episodes per request), or,
with ``--mode ws``, one OpenEnv WebSocket session per agent at an OpenEnv base URL
(reset, then step frames until done), and records the latency of every request
(of every step frame, in ``ws`` mode). Run it in its own process:

    python -m bench.loadgen --url http://127.0.0.1:8000 --agents 64 --seconds 10
    python -m bench.loadgen --url http://127.0.0.1:8000/openenv/tictactoe --mode ws

A service with keys wants ``--api-key`` (default: $WANDER_API_KEY), sent with every
request and WebSocket handshake. Its rate must be above the load (an ``admin`` key has
no limit; a ``trainer`` key's default is 2,000 requests/s), or what is measured is the
rate limit, not the service.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import websockets

OPPONENTS = {
    "random": {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0},
    "optimal": {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0},
}


@dataclass
class Tally:
    steps: int = 0
    episodes: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)
    """When each timed request ended (``time.perf_counter``), for ``--latencies``."""

    def timed(self, started: float) -> None:
        """Count a request that began at ``started`` and ended now."""
        now = time.perf_counter()
        self.latencies.append(now - started)
        self.ended.append(now)


@dataclass
class LoadResult:
    mode: Literal["single", "batch", "ws"]
    agents: int
    batch: int
    opponent: str
    seconds: float
    steps: int
    episodes: int
    requests: int
    errors: int
    steps_per_s: float
    episodes_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


async def post(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    waited: Callable[[], object] = lambda: None,
) -> tuple[Any, float]:
    """The answer to one request, and when the request that got it started: a 503 with
    ``Retry-After`` (the service's backpressure: ``archive_backlog``, ``store_full``,
    ``env_busy``) is waited out (``waited`` is told) and sent again, as clients do; any
    other answer of 400 or more raises."""
    while True:
        started = time.perf_counter()
        async with session.post(url, json=body) as response:
            payload = await response.json()
            retry_after = response.headers.get("Retry-After")
        if response.status == 503 and retry_after is not None:
            waited()
            await asyncio.sleep(float(retry_after))
            continue
        if response.status >= 400:
            raise RuntimeError(payload)
        return payload, started


def random_move(board: str, rng: random.Random) -> str:
    cell = rng.choice([i for i, mark in enumerate(board) if mark == "."])
    return f"<think>random</think><move>{cell}</move>"


class Agent:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        opponent: str,
        seed: int,
        headers: dict[str, str] | None = None,
        run: str | None = None,
    ) -> None:
        self.session, self.url, self.headers = session, url, headers or {}
        self.run = run
        """The run label of the episodes it creates (none by default)."""
        self.config = OPPONENTS[opponent]
        self.rng = random.Random(seed)

    async def post(self, path: str, body: dict[str, Any], tally: Tally) -> Any:
        """The answer to one request (``post``), timed in ``tally``."""
        try:
            payload, started = await post(self.session, self.url + path, body)
        except RuntimeError:
            tally.errors += 1
            raise
        tally.timed(started)
        return payload

    async def create(self, n: int, tally: Tally) -> list[dict[str, Any]]:
        example = self.rng.randrange(10_000)
        body = {"env": "tictactoe", "config": self.config, "example": example, "n": n}
        if self.run is not None:
            body["run"] = self.run
        return (await self.post("/v1/episodes", body, tally))["episodes"]  # type: ignore[no-any-return]

    async def single(self, deadline: float, tally: Tally) -> None:
        while time.perf_counter() < deadline:
            [episode] = await self.create(1, tally)
            board, turn, done = episode["info"]["board"], 0, False
            while not done:
                action = {"action": random_move(board, self.rng), "turn": turn}
                result = await self.post(f"/v1/episodes/{episode['id']}/step", action, tally)
                tally.steps += 1
                board, turn, done = result["info"]["board"], result["turn"], result["done"]
            tally.episodes += 1

    async def socket(self, deadline: float, tally: Tally) -> None:
        """One OpenEnv session, game after game; only the step frames are timed."""
        url = "ws" + self.url.removeprefix("http") + "/ws"
        async with websockets.connect(
            url, max_queue=None, additional_headers=self.headers
        ) as socket:

            async def ask(kind: str, data: dict[str, Any]) -> dict[str, Any]:
                await socket.send(json.dumps({"type": kind, "data": data}))
                frame = json.loads(await socket.recv())
                if frame["type"] != "observation":
                    tally.errors += 1
                    raise RuntimeError(frame)
                return frame["data"]  # type: ignore[no-any-return]

            while time.perf_counter() < deadline:
                reset = {"config": self.config, "example": self.rng.randrange(10_000)}
                result = await ask("reset", reset)
                while not result["done"]:
                    move = random_move(result["observation"]["info"]["board"], self.rng)
                    started = time.perf_counter()
                    result = await ask("step", {"content": move})
                    tally.timed(started)
                    tally.steps += 1
                tally.episodes += 1

    async def batch(self, size: int, deadline: float, tally: Tally) -> None:
        live: dict[str, tuple[str, int]] = {}
        while time.perf_counter() < deadline:
            if len(live) < size:
                for episode in await self.create(size - len(live), tally):
                    live[episode["id"]] = (episode["info"]["board"], 0)
            steps = [
                {"episode_id": id_, "action": random_move(board, self.rng), "turn": turn}
                for id_, (board, turn) in live.items()
            ]
            results = (await self.post("/v1/step", {"steps": steps}, tally))["results"]
            for result in results:
                if "error" in result:
                    tally.errors += 1
                    live.pop(result["episode_id"])
                    continue
                tally.steps += 1
                if result["done"]:
                    tally.episodes += 1
                    live.pop(result["episode_id"])
                else:
                    live[result["episode_id"]] = (result["info"]["board"], result["turn"])


async def run_load(
    url: str,
    agents: int,
    seconds: float,
    mode: str,
    batch: int,
    opponent: str,
    api_key: str | None = None,
    timeline: Path | None = None,
    run: str | None = None,
) -> LoadResult:
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    timeout = aiohttp.ClientTimeout(total=60)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    tallies = [Tally() for _ in range(agents)]
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=headers
    ) as session:
        players = [
            Agent(session, url.rstrip("/"), opponent, seed, headers, run) for seed in range(agents)
        ]
        started = time.perf_counter()
        deadline = started + seconds
        runs = [
            player.single(deadline, tally)
            if mode == "single"
            else player.socket(deadline, tally)
            if mode == "ws"
            else player.batch(batch, deadline, tally)
            for player, tally in zip(players, tallies, strict=True)
        ]
        outcomes = await asyncio.gather(*runs, return_exceptions=True)
        elapsed = time.perf_counter() - started
    failed = sum(isinstance(outcome, BaseException) for outcome in outcomes)
    if timeline is not None:
        write_timeline(timeline, started, tallies)
    latencies = sorted(t for tally in tallies for t in tally.latencies)
    steps = sum(t.steps for t in tallies)
    episodes = sum(t.episodes for t in tallies)
    return LoadResult(
        mode=mode,  # type: ignore[arg-type]
        agents=agents,
        batch=batch if mode == "batch" else 1,
        opponent=opponent,
        seconds=round(elapsed, 2),
        steps=steps,
        episodes=episodes,
        requests=len(latencies),
        errors=sum(t.errors for t in tallies) + failed,
        steps_per_s=steps / elapsed,
        episodes_per_s=episodes / elapsed,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p95_ms=_percentile(latencies, 0.95) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
    )


def write_timeline(path: Path, started: float, tallies: list[Tally]) -> None:
    """Every timed request as ``seconds,latency_ms`` (seconds since the load began), in
    the order they ended: whether the tail comes in bursts (a pause of the server) or is
    spread over the run shows only over time (bench/README.md, "The WebSocket tail")."""
    rows = sorted(
        (end - started, latency)
        for tally in tallies
        for end, latency in zip(tally.ended, tally.latencies, strict=True)
    )
    lines = ["seconds,latency_ms", *(f"{end:.4f},{1000 * lat:.3f}" for end, lat in rows)]
    path.write_text("\n".join(lines) + "\n")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--mode", choices=["single", "batch", "ws"], default="single")
    parser.add_argument("--batch", type=int, default=64, help="episodes per batch request")
    parser.add_argument("--opponent", choices=sorted(OPPONENTS), default="random")
    parser.add_argument(
        "--api-key", default=os.environ.get("WANDER_API_KEY"),
        help="the service's API key [default: $WANDER_API_KEY]",
    )  # fmt: skip
    parser.add_argument(
        "--latencies", type=Path, metavar="CSV",
        help="write every timed request's end time and latency to CSV",
    )  # fmt: skip
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    load = run_load(
        args.url, args.agents, args.seconds, args.mode, args.batch, args.opponent, args.api_key,
        args.latencies,
    )  # fmt: skip
    result = asyncio.run(load)
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
