"""Soak: minutes of mixed load on each store, sampled as it runs, then ``kill -9``.

For each store, a ``wander serve`` (the embedded default: the in-process store and a
SQLite archive; Redis with a PostgreSQL archive) takes ``--seconds`` of mixed load from
this process: batch clients (each stepping ``--width`` tic-tac-toe games a request, as a
trainer's rollout does), single-step agents playing tic-tac-toe one request a move, and
agents answering an ``rg/`` question each episode. Every ``--every`` seconds it samples
the resident memory of the service's process, Redis's ``used_memory``, the archive's
backlog, the games finished and the requests' latency. Then the service is killed with
``kill -9``, started again on the same files (or Redis), and left to archive what was
left; a game a client saw finish and the archive does not hold is lost.

    make bench-soak                      # 10 minutes a store
    python -m bench.soak --seconds 60    # a shorter look

Writes ``bench/results/soak-<time>.json`` (every sample), ``bench/results/soak.md``
(the table, against issue 38's targets) and ``bench/results/soak.png`` (the curves).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import redis
import sqlalchemy

from bench.archive import postgres_database
from bench.loadgen import post, random_move
from bench.measure import backlog, forget_prefix, resident_bytes
from wander.service.archive.migrations import upgrade
from wander.service.archive.tables import ArchivedEpisode
from wander.testing import ServiceProcess

RESULTS = Path(__file__).parent / "results"
RUN = "soak"
RG_ENV = "rg/basic_arithmetic"
LOAD = ("batch_clients", "width", "agents", "rg_agents")
"""The options that say what load ran."""
CLAIM_SECONDS = 60
"""``WANDER_ARCHIVE_CLAIM_SECONDS``, the service's default."""
BOUND = 20_000
"""``WANDER_ARCHIVE_BACKLOG_MAX``, the service's default: the backlog's target."""


@dataclass
class Traffic:
    """What the clients did and saw, since the last sample and in all."""

    finished: set[str] = field(default_factory=set)
    """Every episode a client saw finish."""
    window: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Latencies (seconds) by kind of request since the last sample."""
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: int = 0
    refused: int = 0
    """503s with ``Retry-After`` (backpressure: ``archive_backlog``, ``store_full``)."""

    def timed(self, kind: str, started: float) -> None:
        elapsed = time.perf_counter() - started
        self.window[kind].append(elapsed)
        self.latencies[kind].append(elapsed)


class Client:
    """Requests to one service, timed by kind; a 503 with ``Retry-After`` is waited out."""

    def __init__(self, session: aiohttp.ClientSession, url: str, traffic: Traffic) -> None:
        self.session, self.url, self.traffic = session, url, traffic

    async def post(self, kind: str, path: str, body: dict[str, Any]) -> Any:
        try:
            payload, started = await post(self.session, self.url + path, body, self._refused)
        except RuntimeError:
            self.traffic.errors += 1
            raise
        self.traffic.timed(kind, started)
        return payload

    def _refused(self) -> None:
        self.traffic.refused += 1

    async def create(self, env: str, n: int, rng: random.Random) -> list[dict[str, Any]]:
        body = {"env": env, "n": n, "example": rng.randrange(1000), "run": RUN}
        return (await self.post("create", "/v1/episodes", body))["episodes"]  # type: ignore[no-any-return]


async def batch_client(client: Client, width: int, seed: int, stop: asyncio.Event) -> None:
    rng = random.Random(seed)
    live: dict[str, tuple[str, int]] = {}
    while not stop.is_set():
        if len(live) < width:
            for episode in await client.create("tictactoe", width - len(live), rng):
                live[episode["id"]] = (episode["info"]["board"], 0)
        steps = [
            {"episode_id": id_, "action": random_move(board, rng), "turn": turn}
            for id_, (board, turn) in live.items()
        ]
        results = (await client.post("batch step", "/v1/step", {"steps": steps}))["results"]
        for result in results:
            if "error" in result:
                client.traffic.errors += 1
                live.pop(result["episode_id"])
            elif result["done"]:
                client.traffic.finished.add(result["episode_id"])
                live.pop(result["episode_id"])
            else:
                live[result["episode_id"]] = (result["info"]["board"], result["turn"])


async def single_agent(client: Client, seed: int, stop: asyncio.Event) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        [episode] = await client.create("tictactoe", 1, rng)
        board, turn, done = episode["info"]["board"], 0, False
        while not done:
            body = {"action": random_move(board, rng), "turn": turn}
            result = await client.post("step", f"/v1/episodes/{episode['id']}/step", body)
            board, turn, done = result["info"]["board"], result["turn"], result["done"]
        client.traffic.finished.add(episode["id"])


async def rg_agent(client: Client, seed: int, stop: asyncio.Event) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        [episode] = await client.create(RG_ENV, 1, rng)
        body = {"action": f"<answer>{rng.randrange(100)}</answer>", "turn": 0}
        await client.post("rg step", f"/v1/episodes/{episode['id']}/step", body)
        client.traffic.finished.add(episode["id"])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sampled(
    service: ServiceProcess, traffic: Traffic, every: float, seconds: float,
    redis_client: redis.Redis | None,
) -> list[dict[str, Any]]:  # fmt: skip
    """A sample every ``every`` seconds for ``seconds``."""
    assert service.process is not None
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    seen = 0
    while (elapsed := time.monotonic() - started) < seconds:
        await asyncio.sleep(min(every, seconds - elapsed))
        window, traffic.window = traffic.window, defaultdict(list)
        finished = len(traffic.finished)
        sample: dict[str, Any] = {
            "t": round(time.monotonic() - started, 1),
            "rss_mb": round(resident_bytes(service.process.pid) / 2**20, 1),  # its process
            "backlog": await asyncio.to_thread(backlog, service.url),
            "games": finished - seen,
            "p50_ms": {k: round(percentile(v, 0.5) * 1000, 1) for k, v in window.items()},
            "p99_ms": {k: round(percentile(v, 0.99) * 1000, 1) for k, v in window.items()},
        }
        if redis_client is not None:
            sample["redis_mb"] = round(int(redis_client.info("memory")["used_memory"]) / 2**20, 1)
        seen = finished
        samples.append(sample)
        print(json.dumps(sample), flush=True)
    return samples


def archived(database: str) -> set[str]:
    engine = sqlalchemy.create_engine(database)
    try:
        with engine.connect() as connection:
            query = sqlalchemy.select(ArchivedEpisode.id).where(ArchivedEpisode.run == RUN)
            return set(connection.execute(query).scalars())
    finally:
        engine.dispose()


@contextlib.asynccontextmanager
async def settings_for(store: str, args: argparse.Namespace) -> AsyncIterator[dict[str, str]]:
    """The service's settings: the embedded default, or Redis (a prefix of its own, its
    keys deleted afterwards) with a fresh PostgreSQL archive."""
    if store == "memory":
        with tempfile.TemporaryDirectory() as directory:
            database = f"sqlite:///{directory}/archive.db"
            upgrade(database)
            yield {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}
        return
    prefix = f"bench-soak-{secrets.token_hex(4)}:"
    async with postgres_database(args.postgres) as database:
        try:
            yield {
                "WANDER_DATABASE_URL": database,
                "WANDER_REDIS_URL": args.redis_url,
                "WANDER_REDIS_PREFIX": prefix,
            }
        finally:
            forget_prefix(args.redis_url, prefix)


async def soak(store: str, args: argparse.Namespace) -> dict[str, Any]:
    async with settings_for(store, args) as settings:
        env = {
            **settings,
            "WANDER_LOG_LEVEL": "warning",
            "WANDER_ARCHIVE_BACKLOG_MAX": str(BOUND),
            "WANDER_FINISHED_GRACE_SECONDS": str(args.grace),
        }
        service = ServiceProcess(env).start()
        traffic, stop = Traffic(), asyncio.Event()
        redis_client = redis.Redis.from_url(args.redis_url) if store == "redis" else None
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=120)
        ) as session:
            client = Client(session, service.url, traffic)
            players = [
                *(batch_client(client, args.width, i, stop) for i in range(args.batch_clients)),
                *(single_agent(client, 100 + i, stop) for i in range(args.agents)),
                *(rg_agent(client, 200 + i, stop) for i in range(args.rg_agents)),
            ]
            playing = asyncio.gather(*players, return_exceptions=True)
            samples = await sampled(service, traffic, args.every, args.seconds, redis_client)
            service.kill()  # in the midst of the load: nothing flushed
            stop.set()
            outcomes = await playing
        crashed = [repr(o) for o in outcomes if isinstance(o, BaseException)]
        finished = set(traffic.finished)
        behind = len(finished - archived(settings["WANDER_DATABASE_URL"]))
        # Started again on the same files, or Redis, it archives the rest: on Redis, the
        # records the killed archiver had taken once WANDER_ARCHIVE_CLAIM_SECONDS (60 s)
        # have passed. What the archive holds is counted, not the backlog the service
        # reports (0 until its archiver's first report).
        again = ServiceProcess(env).start()
        try:
            deadline = time.monotonic() + CLAIM_SECONDS + 60
            lost = finished - archived(settings["WANDER_DATABASE_URL"])
            while lost and time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                lost = finished - archived(settings["WANDER_DATABASE_URL"])
        finally:
            again.stop()
        if redis_client is not None:
            redis_client.close()
    return {
        "store": store,
        "seconds": args.seconds,
        "grace": args.grace,
        "load": {key: getattr(args, key) for key in LOAD},
        "games": len(finished),
        "requests": sum(len(v) for v in traffic.latencies.values()),
        "errors": traffic.errors,
        "refused": traffic.refused,
        "clients_stopped_by_the_kill": len(crashed),
        "p50_ms": {k: round(percentile(v, 0.5) * 1000, 1) for k, v in traffic.latencies.items()},
        "p99_ms": {k: round(percentile(v, 0.99) * 1000, 1) for k, v in traffic.latencies.items()},
        "not_archived_at_kill": behind,
        "lost": len(lost),
        "samples": samples,
    }


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Issue 38's targets: each with what was measured and whether it was met."""
    samples = report["samples"]
    settled = [s for s in samples if s["t"] >= 60] or samples
    base = settled[0]["rss_mb"]
    drift = max(abs(s["rss_mb"] - base) for s in settled) / base
    top = max(s["backlog"] for s in samples)
    share = report["lost"] / max(report["games"], 1)
    lost_target = (share == 0) if report["store"] == "redis" else (share <= 0.01)
    return {
        "RSS within 10% of its level after the first minute": (
            f"{base:.0f} MB at 1 min, {settled[-1]['rss_mb']:.0f} MB at the end, "
            f"{drift:.0%} at most", drift <= 0.10),
        "backlog never above the bound": (f"{top:,} at most (bound {BOUND:,})", top <= BOUND),
        "lost after the kill (0 on Redis, at most 1% embedded)": (
            f"{report['lost']:,} of {report['games']:,} ({share:.2%})", lost_target),
    }  # fmt: skip


def markdown(reports: list[dict[str, Any]], when: str) -> str:
    lines = [
        "# Soak (`make bench-soak`)", "",
        f"{when}, the 2-core AMD EPYC; `python -m bench.soak` (its docstring says what runs).",
        "",
    ]  # fmt: skip
    for report in reports:
        load = report["load"]
        name = "in-process store, SQLite" if report["store"] == "memory" else "Redis, PostgreSQL"
        lines += [
            f"## {name}", "",
            f"{report['seconds']:.0f} s (finished games kept {report['grace']:.0f} s for a "
            f"retried last step): {load['batch_clients']} batch clients x "
            f"{load['width']} tic-tac-toe games, {load['agents']} single-step agents, "
            f"{load['rg_agents']} `{RG_ENV}` agents. {report['games']:,} games "
            f"({report['games'] / report['seconds']:,.0f}/s), {report['requests']:,} requests, "
            f"{report['errors']} errors, {report['refused']:,} answered 503 with Retry-After "
            f"and retried; {report['not_archived_at_kill']:,} finished games not yet archived "
            "at the kill.", "",
            "| request | p50 ms | p99 ms |", "|---|---|---|",
            *(f"| {kind} | {report['p50_ms'][kind]} | {report['p99_ms'][kind]} |"
              for kind in sorted(report["p50_ms"])),
            "", "| target | measured | met |", "|---|---|---|",
            *(f"| {target} | {measured} | {'yes' if met else 'no'} |"
              for target, (measured, met) in verdicts(report).items()),
            "",
        ]  # fmt: skip
    return "\n".join(lines)


def plot(reports: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
    for report in reports:
        t = [s["t"] for s in report["samples"]]
        label = report["store"]
        axes[0].plot(t, [s["rss_mb"] for s in report["samples"]], label=f"{label}: service RSS")
        if report["store"] == "redis":
            redis_mb = [s.get("redis_mb", 0) for s in report["samples"]]
            axes[0].plot(t, redis_mb, linestyle="--", label="redis: used_memory")
        axes[1].plot(t, [s["backlog"] for s in report["samples"]], label=label)
        p99 = [s["p99_ms"].get("batch step", 0) for s in report["samples"]]
        axes[2].plot(t, p99, label=f"{label}: batch step")
        p99 = [s["p99_ms"].get("step", 0) for s in report["samples"]]
        axes[2].plot(t, p99, linestyle=":", label=f"{label}: single step")
    axes[1].axhline(BOUND, color="grey", linestyle="--", label="bound")
    for axis, title in zip(axes, ("memory (MB)", "archive backlog (games)", "p99 (ms)"),
                           strict=True):  # fmt: skip
        axis.set_ylabel(title)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    axes[-1].set_xlabel("seconds of load")
    axes[0].set_title("Soak: mixed load, then kill -9")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument(
        "--grace", type=float, default=600.0, help="WANDER_FINISHED_GRACE_SECONDS (its default)"
    )
    parser.add_argument("--batch-clients", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--rg-agents", type=int, default=4)
    parser.add_argument("--stores", default="memory,redis")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1"))
    parser.add_argument("--postgres", default="postgresql://127.0.0.1/test")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    reports = [asyncio.run(soak(store, args)) for store in args.stores.split(",")]
    now = datetime.now(UTC)
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = now.strftime("%Y%m%d-%H%M%S")
    (args.results / f"soak-{stamp}.json").write_text(json.dumps(reports, indent=1) + "\n")
    (args.results / "soak.md").write_text(markdown(reports, now.strftime("%Y-%m-%d")))
    plot(reports, args.results / "soak.png")
    print(markdown(reports, now.strftime("%Y-%m-%d")))


if __name__ == "__main__":
    main()
