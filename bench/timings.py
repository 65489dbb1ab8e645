"""The speed claims the tests used to assert, measured: ``python -m bench.timings``.

The tests keep the behaviour (the answer is right, the input is refused with the right
error, the cap applies); how long it takes is measured here and written down in
bench/README.md ("Timings the tests no longer assert"). Each part prints a markdown table:

- ``parsing``: tic-tac-toe's linear parsers (``formatted``, ``parse_move``) on hostile
  actions of growing size, against the regular expressions they replaced
  (tests/test_linear_parsing.py);
- ``edge``: against one real ``wander serve`` (in-process store): a hostile tic-tac-toe
  step, the ``sql`` environment's hostile queries (tests/test_environments.py), a
  declared 300 MB body (tests/test_limits.py), a reasoning-gym option past its bound
  (tests/test_rg_bounds.py), each from request to answer;
- ``rg``: every reasoning-gym dataset's largest numeric option x1000, 8 at a time, while
  a light client plays tic-tac-toe: how long refusals and plays take, and the light
  client's latency alone and during the attack (tests/test_rg_bounds.py);
- ``flood``: a key limited to 20 requests/s flooding a ``wander serve`` on Redis while
  another tenant steps: that tenant's step latency alone and next to the flood
  (tests/test_auth_live.py). Needs a Redis (``--redis-url``).

    python -m bench.timings [--parts parsing,edge,rg,flood] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from wander.service.archive import Archive, KeyBook
from wander.service.archive.migrations import upgrade
from wander.service.envs.tictactoe.env import formatted, parse_move
from wander.service.tenancy import Role
from wander.testing import FLOOD, ServiceProcess, light_client, oversized_rg_configs

PARTS = ("parsing", "edge", "rg", "flood")
HOSTILE: dict[str, Callable[[int], str]] = {
    "moves": lambda n: "<move>" * n,
    "thinks": lambda n: "<think>" * n,
    "think-moves": lambda n: "<think></think>" + "<move>" * n,
    "pairs": lambda n: "<think></think><move>" * (n * 3 // 8),
}
"""tests/test_linear_parsing.py's hostile actions, ``n`` repeats of their tag."""
FORMAT = re.compile(r"\s*<think>.*?</think>.*?<move>.*?</move>\s*", re.DOTALL)
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
MOVE = re.compile(r"<move>(.*?)</move>", re.DOTALL)
SQL_HOSTILE = {
    "DROP TABLE": "DROP TABLE orders",
    "ATTACH DATABASE": "ATTACH DATABASE '/tmp/wander-escape.db' AS x",
    "load_extension": "SELECT load_extension('/tmp/x')",
    "recursive CTE without end": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    ),
    "two statements": "SELECT 1; DROP TABLE orders",
}
PAST_BOUNDS = {
    "count_primes max_n=10**6": ("count_primes", {"max_n": 10**6}),
    "calendar_arithmetic year=10**9": ("calendar_arithmetic", {"year": 10**9}),
    "basic_arithmetic 1,000 operators": ("basic_arithmetic", {"operators": ["+"] * 1000}),
}
RG_DEADLINE = 2.0
"""``WANDER_ENV_CALL_SECONDS`` of the ``rg`` part, as tests/test_rg_bounds.py sets it."""


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(call: Callable[[], object]) -> float:
    """Seconds ``call`` takes."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def best_of(call: Callable[[], object], runs: int) -> float:
    return min(timed(call) for _ in range(runs))


def new_parse(content: str) -> tuple[bool, int | str]:
    """What tic-tac-toe does with an action: the format check, then the move."""
    return formatted(content), parse_move(content)


def old_parse(content: str) -> tuple[bool, list[str]]:
    """What the expressions did: the format check, then the moves outside thoughts."""
    return bool(FORMAT.fullmatch(content)), MOVE.findall(THINK.sub("", content))


def parsing() -> None:
    print("Linear parsers (`formatted` + `parse_move`), best of 5, ms:\n")
    sizes = (8_000, 16_000, 32_000, 80_000)
    print("| input | " + " | ".join(f"n = {n:,}" for n in sizes) + " | last / first |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for name, make in HOSTILE.items():
        seconds = [best_of(partial(new_parse, make(n)), 5) for n in sizes]
        cells = " | ".join(f"{s * 1e3:.2f}" for s in seconds)
        print(f"| {name} | {cells} | {seconds[-1] / seconds[0]:.1f}x (size 10x) |")
    print("\nThe expressions they replaced, one run each, ms:\n")
    sizes = (250, 500, 1_000)
    print("| input | " + " | ".join(f"n = {n:,}" for n in sizes) + " | last / first |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for name, make in HOSTILE.items():
        seconds = [timed(partial(old_parse, make(n))) for n in sizes]
        cells = " | ".join(f"{s * 1e3:,.1f}" for s in seconds)
        print(f"| {name} | {cells} | {seconds[-1] / max(seconds[0], 1e-6):,.0f}x (size 4x) |")


def sql_step(query: str) -> dict[str, Any]:
    """A step body whose action calls ``run_sql`` with ``query``."""
    call = {"id": "h", "type": "function",
            "function": {"name": "run_sql", "arguments": json.dumps({"query": query})}}  # fmt: skip
    return {"action": {"role": "assistant", "content": None, "tool_calls": [call]}}


def declared_body_refusal(port: int) -> float:
    """Seconds from a request's headers (declaring 300 MB) to the service's 413 and close."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(
            b"POST /v1/step HTTP/1.1\r\nHost: wander\r\nContent-Type: application/json\r\n"
            b"Content-Length: 300000000\r\n\r\n"
        )
        started = time.perf_counter()
        received = b""
        while chunk := connection.recv(4096):
            received += chunk
        elapsed = time.perf_counter() - started
    assert received.startswith(b"HTTP/1.1 413"), received
    return elapsed


def row(what: str, seconds: list[float], answer: str) -> str:
    median, slowest = statistics.median(seconds) * 1e3, max(seconds) * 1e3
    return f"| {what} | {len(seconds)} | {median:,.1f} | {slowest:,.1f} | {answer} |"


def edge(folder: Path, runs: int) -> None:
    database = f"sqlite:///{folder}/edge.db"
    upgrade(database)
    service = ServiceProcess({"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}).start()
    rows = []
    try:
        with httpx.Client(base_url=service.url, timeout=60) as api:

            def post(path: str, body: dict[str, Any]) -> tuple[float, httpx.Response]:
                started = time.perf_counter()
                response = api.post(path, json=body)
                return time.perf_counter() - started, response

            hostile = {"action": "<think></think>" + "<move>" * 8000}
            took = []
            for _ in range(runs):
                episode = api.post("/v1/episodes", json={"env": "tictactoe"}).json()
                seconds, response = post(f"/v1/episodes/{episode['episodes'][0]['id']}/step",
                                         hostile)  # fmt: skip
                took.append(seconds)
            rows.append(row("tic-tac-toe step, `<move>` x 8,000", took, str(response.status_code)))
            for name, query in SQL_HOSTILE.items():
                took = []
                for _ in range(max(3, runs // 10)):
                    created = api.post("/v1/episodes", json={"env": "sql", "example": 1}).json()
                    path = f"/v1/episodes/{created['episodes'][0]['id']}/step"
                    seconds, response = post(path, sql_step(query))
                    took.append(seconds)
                reply = response.json()["observation"][0]["content"]
                rows.append(row(f"sql: {name}", took, reply.split(":")[0]))
            took = [declared_body_refusal(service.port) for _ in range(runs)]
            rows.append(row("declared 300 MB body (headers to close)", took, "413"))
            for name, (dataset, options) in PAST_BOUNDS.items():
                body = {"env": f"rg/{dataset}", "config": {"options": options}}
                took = []
                for _ in range(runs):
                    seconds, response = post("/v1/episodes", body)
                    took.append(seconds)
                rows.append(row(f"rg option past its bound: {name}", took, "422"))
    finally:
        service.stop()
    print("One request at a time, request to answer, ms:\n")
    print("| request | runs | median ms | slowest ms | answer |\n|---|---|---|---|---|")
    print("\n".join(rows))


def latency_cells(latencies: list[float]) -> str:
    p50, p99 = quantile(latencies, 0.5) * 1e3, quantile(latencies, 0.99) * 1e3
    return f"{len(latencies)} | {p50:,.1f} | {p99:,.1f} | {max(latencies) * 1e3:,.1f}"


async def rg(folder: Path, seconds: float) -> None:
    database = f"sqlite:///{folder}/rg.db"
    upgrade(database)
    limits = {"WANDER_ENV_CALL_SECONDS": str(RG_DEADLINE), "WANDER_ENV_WAIT_SECONDS": "120"}
    service = ServiceProcess(
        {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": "", **limits}
    ).start()
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=120) as client:
            stop = asyncio.Event()
            alone_task = asyncio.create_task(light_client(client, stop))
            await asyncio.sleep(seconds)
            stop.set()
            alone = await alone_task
            attacks = [(d, c) for d, c in oversized_rg_configs() if d != "composite"]  # not offered
            gate = asyncio.Semaphore(8)

            async def attack(dataset: str, config: dict[str, Any]) -> tuple[float, int, str]:
                async with gate:
                    started = time.perf_counter()
                    body = {"env": f"rg/{dataset}", "config": config, "example": 0}
                    response = await client.post("/v1/episodes", json=body)
                    code = "" if response.is_success else response.json()["error"]["code"]
                    return time.perf_counter() - started, response.status_code, code

            stop = asyncio.Event()
            during_task = asyncio.create_task(light_client(client, stop))
            started = time.perf_counter()
            answers = await asyncio.gather(*(attack(d, c) for d, c in attacks))
            attack_seconds = time.perf_counter() - started
            stop.set()
            during = await during_task
    finally:
        service.stop()
    refused = [s for s, status, code in answers if code == "validation_error"]
    played = [s for s, status, code in answers if code != "validation_error"]
    timeouts = sum(code == "env_timeout" for _, _, code in answers)
    print(f"{len(attacks)} oversized configs, 8 at a time, deadline {RG_DEADLINE:g} s, "
          f"2 workers; the attack took {attack_seconds:.1f} s.\n")  # fmt: skip
    print("| requests | count | median ms | slowest ms |\n|---|---|---|---|")
    print(f"| refused by their bound (`validation_error`) | {len(refused)} | "
          f"{statistics.median(refused) * 1e3:,.1f} | {max(refused) * 1e3:,.1f} |")  # fmt: skip
    print(f"| played (201, or `env_timeout` x {timeouts}, other refusals) | {len(played)} | "
          f"{statistics.median(played) * 1e3:,.1f} | {max(played) * 1e3:,.1f} |")  # fmt: skip
    print("\n| light client | requests | p50 ms | p99 ms | slowest ms |\n|---|---|---|---|---|")
    print(f"| alone ({seconds:g} s) | {latency_cells(alone)} |")
    print(f"| during the attack | {latency_cells(during)} |")


async def calm_steps(api: httpx.AsyncClient, key: str, steps: int) -> list[float]:
    """Seconds per step of tic-tac-toe games played one step at a time by ``key``."""
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}
    while len(latencies) < steps:
        created = await api.post("/v1/episodes", json={"env": "tictactoe"}, headers=headers)
        episode_id, done, move = created.json()["episodes"][0]["id"], False, 0
        while not done and len(latencies) < steps:
            started = time.perf_counter()
            response = await api.post(f"/v1/episodes/{episode_id}/step", headers=headers,
                                      json={"action": f"<move>{move}</move>"})  # fmt: skip
            latencies.append(time.perf_counter() - started)
            done, move = response.json()["done"], move + 1
    return latencies


async def flood(folder: Path, redis_url: str, steps: int, seconds: float) -> None:
    database = f"sqlite:///{folder}/flood.db"
    upgrade(database)
    archive = Archive(database)
    try:
        book = KeyBook(archive)
        _, flood_key = book.create(
            "flood", Role.agent, quotas={"requests_per_second": 20, "burst": 20}
        )
        _, calm_key = book.create("calm", Role.trainer)
    finally:
        archive.dispose()
    service = ServiceProcess({
        "WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": redis_url,
        "WANDER_REDIS_PREFIX": f"bench-timings-{secrets.token_hex(4)}:", "WANDER_AUTH": "keys",
    }).start()  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=30) as api:
            await calm_steps(api, calm_key, 20)  # warm up
            before = await calm_steps(api, calm_key, steps)
            process = subprocess.Popen(
                [sys.executable, "-c", FLOOD, service.url, flood_key, str(seconds)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert process.stdout is not None
                await asyncio.to_thread(process.stdout.readline)
                await asyncio.sleep(0.2)
                loaded = await calm_steps(api, calm_key, steps)
                out, _ = process.communicate(timeout=seconds + 30)
            finally:
                process.kill()
            after = await calm_steps(api, calm_key, steps)
    finally:
        service.stop()
    taken, limited = map(int, out.split())
    print(f"Flood: {seconds:g} s, {taken} requests taken, {limited} refused (429) by the "
          f"key's 20/s and burst 20. The calm tenant's steps, {steps} each way:\n")  # fmt: skip
    print("| calm tenant's steps | steps | p50 ms | p99 ms | slowest ms |\n|---|---|---|---|---|")
    print(f"| alone (before and after the flood) | {latency_cells(before + after)} |")
    print(f"| next to the flood | {latency_cells(loaded)} |")
    ratio = quantile(loaded, 0.99) / quantile(before + after, 0.99)
    print(f"\np99 next to the flood / alone: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    parser.add_argument("--runs", type=int, default=50, help="of each request (edge)")
    parser.add_argument("--seconds", type=float, default=5.0, help="light client alone (rg)")
    parser.add_argument("--steps", type=int, default=500, help="calm steps each way (flood)")
    parser.add_argument("--flood-seconds", type=float, default=5.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    parts = args.parts.split(",")
    load = float("nan")
    with contextlib.suppress(OSError):
        load = os.getloadavg()[0]
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {load:.1f}\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-timings-") as temporary:
        folder = Path(temporary)
        for part in parts:
            print(f"## {part}\n")
            if part == "parsing":
                parsing()
            elif part == "edge":
                edge(folder, args.runs)
            elif part == "rg":
                asyncio.run(rg(folder, args.seconds))
            elif part == "flood":
                asyncio.run(flood(folder, args.redis_url, args.steps, args.flood_seconds))
            else:
                parser.error(f"no part {part!r}: {', '.join(PARTS)}")
            print()


if __name__ == "__main__":
    main()
