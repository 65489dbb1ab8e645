"""``make bench``: the standard matrix against a live service, written to bench/results/.

For each store (in-process, Redis) a fresh ``wander serve`` is started; the load
generator runs in its own process for every cell of the matrix (single-step
endpoint with K = 1, 16, 64, 256 agents; batch endpoint with B = 64, 256
episodes per request), and the same games are played in-process as the ceiling.
Then 64 OpenEnv WebSocket sessions play through Wander's ``/openenv/tictactoe/ws`` on
Redis and, for comparison, against OpenEnv 0.10's own server hosting the same game
in memory (bench/openenv_tictactoe.py, run from a venv of its own: `openenv_python`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.baseline import play_in_process
from wander.testing import ServiceProcess, cached_venv

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SESSIONS = 64  # concurrent OpenEnv WebSocket sessions on each server
SINGLE_AGENTS = (1, 16, 64, 256)
BATCHES = ((1, 64), (1, 256), (4, 64), (4, 256))  # (agents, episodes per request)


def machine(redis_url: str) -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    info = redis.Redis.from_url(redis_url)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "redis": info.info("server")["redis_version"],
        "platform": platform.platform(),
    }


def load(url: str, seconds: float, **cell: Any) -> dict[str, Any]:
    args = [f"--{key}={value}" for key, value in cell.items()]
    command = [sys.executable, "-m", "bench.loadgen", f"--url={url}", f"--seconds={seconds}", *args]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])  # type: ignore[no-any-return]


def matrix(store: str, env: dict[str, str], workers: int, seconds: float) -> list[dict[str, Any]]:
    server = ServiceProcess(env, command=("serve", "--workers", str(workers))).start()
    rows = []
    try:
        httpx.post(f"{server.url}/v1/episodes", json={"env": "tictactoe"})  # warm up
        cells = [{"mode": "single", "agents": k} for k in SINGLE_AGENTS]
        cells += [{"mode": "batch", "agents": k, "batch": b} for k, b in BATCHES]
        for cell in cells:
            row = {"store": store, "workers": workers, **load(server.url, seconds, **cell)}
            print(_line(row), flush=True)
            rows.append(row)
    finally:
        server.kill()
    return rows


def openenv_python() -> str:
    """A venv with openenv 0.10, built on first use under .cache/bench/: openenv pins
    mcp 1.x through fastmcp, which cannot share Wander's venv (see tests/interop.py)."""
    home = ROOT / ".cache" / "bench" / "openenv010"
    return str(cached_venv(home, ["openenv==0.10.*"], ROOT / "constraints.txt"))


def websocket_rows(on_redis: dict[str, str], python: str, seconds: float) -> list[dict[str, Any]]:
    """The same WebSocket load on Wander (Redis) and on OpenEnv's own server (memory)."""
    wander = ServiceProcess(on_redis).start()
    openenv = ServiceProcess(
        {},
        command=("bench.openenv_tictactoe:app", "--log-level", "warning"),
        health="/health",
        python=python,
        cwd=str(ROOT),
        module="uvicorn",
    )
    rows = []
    try:
        openenv.start()
        targets = (
            ("wander", "redis", f"{wander.url}/openenv/tictactoe"),
            ("openenv 0.10", "memory", openenv.url),
        )
        for server, store, url in targets:
            load(url, 1.0, mode="ws", agents=SESSIONS)  # warm up: imports, first sessions
            measured = load(url, seconds, mode="ws", agents=SESSIONS)
            row = {"server": server, "store": store, **measured}
            print(
                f"{server:>12} {store:>6} WS K={SESSIONS} {row['steps_per_s']:>8.0f} steps/s  "
                f"p99 {row['p99_ms']:.1f} ms",
                flush=True,
            )
            rows.append(row)
    finally:
        wander.kill()
        openenv.kill()
    return rows


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['store']:>6} x{row['workers']} {row['mode']:>6} K={row['agents']:<3} "
        f"B={row['batch']:<3} {row['steps_per_s']:>8.0f} steps/s  p99 {row['p99_ms']:.1f} ms"
    )


def markdown(report: dict[str, Any]) -> str:
    ceiling = {b["opponent"]: b["steps_per_s"] for b in report["baseline"]}
    lines = [
        f"Measured {report['date']} on {report['machine']['cpu']}, "
        f"{report['machine']['cores']} cores (service and load generator sharing them), "
        f"Python {report['machine']['python']}, Redis {report['machine']['redis']}; "
        f"{report['seconds']:g} s per cell, random legal moves against the random opponent.",
        "",
        "| store | workers | endpoint | agents K | episodes/request B | steps/s | episodes/s "
        "| p50 ms | p95 ms | p99 ms | errors | share of in-process |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        endpoint = "`POST /v1/episodes/{id}/step`" if row["mode"] == "single" else "`POST /v1/step`"
        lines.append(
            f"| {row['store']} | {row['workers']} | {endpoint} | {row['agents']} | {row['batch']} "
            f"| {row['steps_per_s']:,.0f} | {row['episodes_per_s']:,.0f} | {row['p50_ms']:.1f} "
            f"| {row['p95_ms']:.1f} | {row['p99_ms']:.1f} | {row['errors']} "
            f"| {row['steps_per_s'] / ceiling[row['opponent']]:.3f} |"
        )
    lines += ["", "In-process ceiling (the environment SDK alone, one core):", ""]
    lines += ["| opponent | steps/s | episodes/s | p50 µs | p99 µs |", "|---|---|---|---|---|"]
    for b in report["baseline"]:
        lines.append(
            f"| {b['opponent']} | {b['steps_per_s']:,.0f} | {b['episodes_per_s']:,.0f} "
            f"| {b['p50_us']:.1f} | {b['p99_us']:.1f} |"
        )
    return "\n".join(lines + websocket_table(report["websocket"])) + "\n"


def websocket_table(rows: list[dict[str, Any]]) -> list[str]:
    """The WS rows and the ratio against issue 21's target (>= 1.0x, p99 <= 25 ms)."""
    if not rows:
        return []
    lines = [
        "",
        f"OpenEnv WebSocket sessions: {SESSIONS} sessions, `reset` then `step` frames until "
        "done, step frames timed:",
        "",
        "| server | store | sessions | steps/s | episodes/s | p50 ms | p95 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['server']} | {row['store']} | {row['agents']} | {row['steps_per_s']:,.0f} "
            f"| {row['episodes_per_s']:,.0f} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} "
            f"| {row['p99_ms']:.1f} | {row['errors']} |"
        )
    wander, openenv = rows
    ratio = wander["steps_per_s"] / openenv["steps_per_s"]
    met = ratio >= 1.0 and wander["p99_ms"] <= 25.0
    lines += [
        "",
        f"Wander / OpenEnv steps/s: **{ratio:.2f}x**; p99 {wander['p99_ms']:.1f} ms (Wander) "
        f"vs {openenv['p99_ms']:.1f} ms (OpenEnv). Target (>= 1.0x, p99 <= 25 ms): "
        f"**{'met' if met else 'missed'}**.",
    ]
    return lines


def main() -> None:
    # `kill` then tears down the service this script started, as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parser = argparse.ArgumentParser(description="Run the standard service benchmark.")
    parser.add_argument("--seconds", type=float, default=5.0, help="per cell of the matrix")
    parser.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--redis-workers", type=int, default=2, help="extra Redis run with N workers"
    )
    parser.add_argument(
        "--openenv-python",
        help="python of a venv with openenv 0.10 (default: built under .cache/bench/)",
    )
    args = parser.parse_args()
    python = args.openenv_python or openenv_python()
    baseline = [asdict(play_in_process(opponent)) for opponent in ("random", "optimal")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        database = {
            "WANDER_DATABASE_URL": f"sqlite:///{scratch}/bench.db",
            "WANDER_LOG_LEVEL": "warning",  # no line per request
        }
        rows += matrix("memory", {**database, "WANDER_REDIS_URL": ""}, 1, args.seconds)
        prefix = f"bench:{uuid.uuid4().hex[:8]}:"
        on_redis = {**database, "WANDER_REDIS_URL": args.redis_url, "WANDER_REDIS_PREFIX": prefix}
        rows += matrix("redis", on_redis, 1, args.seconds)
        if args.redis_workers > 1:
            rows += matrix("redis", on_redis, args.redis_workers, args.seconds)
        sockets = websocket_rows(on_redis, python, args.seconds)
        client = redis.Redis.from_url(args.redis_url)
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(args.redis_url),
        "seconds": args.seconds,
        "baseline": baseline,
        "rows": rows,
        "websocket": sockets,
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"service-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (RESULTS / "latest.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
