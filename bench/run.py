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
import contextlib
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

from bench.baseline import play_in_process
from bench.measure import forget_prefix
from wander.service.redis_url import parse_redis_url
from wander.service.store.targets import primaries
from wander.testing import ServiceProcess, cached_venv, running_processes

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SESSIONS = 64  # concurrent OpenEnv WebSocket sessions on each server
WS_ROUNDS = 3  # interleaved rounds of the WebSocket comparison; each server's median is kept
SINGLE_AGENTS = (1, 16, 64, 256)
BATCHES = ((1, 64), (1, 256), (4, 64), (4, 256))  # (agents, episodes per request)


def machine(redis_url: str) -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    _, info = primaries(parse_redis_url(redis_url))[0]  # one Redis, or a cluster's first primary
    with info:
        version = info.info("server")["redis_version"]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "redis": version,
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


def websocket_rows(
    on_redis: dict[str, str], python: str, seconds: float, rounds: int = WS_ROUNDS
) -> list[dict[str, Any]]:
    """The same WebSocket load on Wander (Redis) and on OpenEnv's own server (memory), in
    interleaved rounds (Wander, OpenEnv, Wander, ...): on a shared machine one run of each
    swings by a third, and a round's neighbour sees the same weather. Each server's row
    is its median round by steps/s, with the CPU time its processes spent per step
    (from /proc), which the machine's other load moves less than throughput."""
    wander = ServiceProcess(on_redis).start()
    openenv = ServiceProcess(
        {},
        command=("bench.openenv_tictactoe:app", "--log-level", "warning"),
        health="/health",
        python=python,
        cwd=str(ROOT),
        module="uvicorn",
    )
    measured: dict[str, list[dict[str, Any]]] = {"wander": [], "openenv 0.10": []}
    try:
        openenv.start()
        targets = (
            ("wander", "redis", wander, f"{wander.url}/openenv/tictactoe"),
            ("openenv 0.10", "memory", openenv, openenv.url),
        )
        for _, _, _, url in targets:
            load(url, 1.0, mode="ws", agents=SESSIONS)  # warm up: imports, first sessions
        for round_ in range(rounds):
            for server, store, process, url in targets:
                before = _cpu_seconds(process)
                row = {"server": server, "store": store, **load(url, seconds, mode="ws",
                                                                agents=SESSIONS)}  # fmt: skip
                row["cpu_us_per_step"] = 1e6 * (_cpu_seconds(process) - before) / row["steps"]
                print(
                    f"{server:>12} {store:>6} WS K={SESSIONS} round {round_ + 1}: "
                    f"{row['steps_per_s']:>8.0f} steps/s  p99 {row['p99_ms']:.1f} ms  "
                    f"{row['cpu_us_per_step']:.0f} µs CPU/step",
                    flush=True,
                )
                measured[server].append(row)
    finally:
        wander.kill()
        openenv.kill()
    return [_median_round(rows) for rows in measured.values()]


def _median_round(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round by steps/s, with every round's steps/s beside it."""
    ordered = sorted(rows, key=lambda row: row["steps_per_s"])
    return {**ordered[(len(ordered) - 1) // 2], "rounds": [r["steps_per_s"] for r in rows]}


def _cpu_seconds(server: ServiceProcess) -> float:
    """CPU time (user + system) the server's processes have used so far."""
    assert server.process is not None
    group = server.process.pid
    ticks = 0
    for process in running_processes():
        if process.pgid == group:
            with contextlib.suppress(OSError):  # it ended while we looked
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['store']:>6} x{row['workers']} {row['mode']:>6} K={row['agents']:<3} "
        f"B={row['batch']:<3} {row['steps_per_s']:>8.0f} steps/s  p99 {row['p99_ms']:.1f} ms"
    )


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Measured {report['date']} on {report['machine']['cpu']}, "
        f"{report['machine']['cores']} cores (service and load generator sharing them), "
        f"Python {report['machine']['python']}, Redis {report['machine']['redis']}; "
        f"{report['seconds']:g} s per cell, random legal moves against the random opponent.",
    ]
    return "\n".join(lines + matrix_table(report) + websocket_table(report["websocket"])) + "\n"


def matrix_table(report: dict[str, Any]) -> list[str]:
    """The matrix's rows, each with its share of the in-process ceiling (none for a
    WebSocket-only run)."""
    if not report["rows"]:
        return []
    ceiling = {b["opponent"]: b["steps_per_s"] for b in report["baseline"]}
    lines = [
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
    lines += [
        "| opponent | steps/s | steps per CPU-second | episodes/s | p50 µs | p99 µs |",
        "|---|---|---|---|---|---|",
    ]
    for b in report["baseline"]:
        lines.append(
            f"| {b['opponent']} | {b['steps_per_s']:,.0f} | {b['cpu_steps_per_s']:,.0f} "
            f"| {b['episodes_per_s']:,.0f} | {b['p50_us']:.1f} | {b['p99_us']:.1f} |"
        )
    return lines


def websocket_table(rows: list[dict[str, Any]]) -> list[str]:
    """The WS rows and the ratio against the WebSocket target (>= 1.0x, p99 <= 25 ms)."""
    if not rows:
        return []
    lines = [
        "",
        f"OpenEnv WebSocket sessions: {SESSIONS} sessions, `reset` then `step` frames until "
        "done, step frames timed:",
        "",
        "| server | store | sessions | steps/s (median round) | all rounds | episodes/s "
        "| p50 ms | p95 ms | p99 ms | server CPU µs/step | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        rounds = ", ".join(f"{value:,.0f}" for value in row.get("rounds", [row["steps_per_s"]]))
        cpu = f"{row['cpu_us_per_step']:.0f}" if "cpu_us_per_step" in row else "-"
        lines.append(
            f"| {row['server']} | {row['store']} | {row['agents']} | {row['steps_per_s']:,.0f} "
            f"| {rounds} | {row['episodes_per_s']:,.0f} | {row['p50_ms']:.1f} "
            f"| {row['p95_ms']:.1f} | {row['p99_ms']:.1f} | {cpu} | {row['errors']} |"
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
    parser.add_argument(
        "--websocket-only", action="store_true",
        help="only the OpenEnv WebSocket comparison (about a minute), into websocket.md",
    )  # fmt: skip
    parser.add_argument(
        "--ws-rounds", type=int, default=WS_ROUNDS,
        help="interleaved rounds of the WebSocket comparison (each server's median is kept)",
    )  # fmt: skip
    args = parser.parse_args()
    python = args.openenv_python or openenv_python()
    baseline: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        database = {
            "WANDER_DATABASE_URL": f"sqlite:///{scratch}/bench.db",
            "WANDER_LOG_LEVEL": "warning",  # no line per request
        }
        prefix = f"bench:{uuid.uuid4().hex[:8]}:"
        on_redis = {**database, "WANDER_REDIS_URL": args.redis_url, "WANDER_REDIS_PREFIX": prefix}
        if not args.websocket_only:
            baseline = [asdict(play_in_process(opponent)) for opponent in ("random", "optimal")]
            rows += matrix("memory", {**database, "WANDER_REDIS_URL": ""}, 1, args.seconds)
            rows += matrix("redis", on_redis, 1, args.seconds)
            if args.redis_workers > 1:
                rows += matrix("redis", on_redis, args.redis_workers, args.seconds)
        sockets = websocket_rows(on_redis, python, args.seconds, args.ws_rounds)
        forget_prefix(args.redis_url, prefix)
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
    kind = "websocket" if args.websocket_only else "service"
    (RESULTS / f"{kind}-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (RESULTS / ("websocket.md" if args.websocket_only else "latest.md")).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
