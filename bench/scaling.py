"""``make bench-scaling``: steps/s against the number of service workers, on one Redis
and on a Redis Cluster.

For each store of ``--stores`` (``redis,cluster`` by default), in turn, and each N of
``--workers`` (1, 2, 4 by default) a fresh ``wander serve --workers N`` is warmed up,
then loaded for ``--seconds`` by the load generator (bench/loadgen.py: K agents in a
closed loop, single steps or batches), from ``--generators`` processes at once (one load
generator is one core: on a host with more cores than workers, give it several).

``redis`` is the Redis at ``--redis-url``; ``cluster`` is the cluster at
``--cluster-url``, or, without one, a Redis Cluster of three primaries started here on
free local ports (``wander.testing.RedisCluster``, the one the tests start) and stopped,
with its files, after its curve. Each store's curve writes, under bench/results/:

- ``scaling-<store>.json``: the machine, the store, the load, one row per N;
- ``scaling.md`` and ``scaling.png``: the table and the curve of every
  ``scaling-*.json`` there, one line per store, with the ideal (N times the rate of
  the fewest workers) dashed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.run import RESULTS, load, machine
from wander.service.redis_url import parse_redis_url
from wander.service.store.targets import primaries
from wander.testing import RedisCluster, ServiceProcess

WARM_UP_SECONDS = 1.0
"""Every worker imports, connects and loads its scripts on its first requests."""


@dataclass(frozen=True)
class Load:
    """What loads each point of the curve: ``agents`` in all, over ``generators``."""

    seconds: float
    agents: int
    mode: str  # "single" or "batch"
    batch: int
    generators: int


def generate(url: str, work: Load, seconds: float) -> dict[str, Any]:
    """The load generators' results, added up: rates and counts sum; latencies are the
    worst generator's (percentiles of separate processes do not combine)."""
    share = [work.agents // work.generators] * work.generators
    share[0] += work.agents % work.generators
    cell = {"mode": work.mode, "batch": work.batch}
    with ThreadPoolExecutor(work.generators) as pool:
        parts = list(pool.map(lambda k: load(url, seconds, agents=k, **cell), share))
    total: dict[str, Any] = {
        key: sum(part[key] for part in parts)
        for key in ("steps", "episodes", "requests", "errors", "steps_per_s", "episodes_per_s")
    }
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        total[key] = max(part[key] for part in parts)
    return total


def point(env: dict[str, str], workers: int, work: Load) -> dict[str, Any]:
    """One ``wander serve --workers N``, warmed up, then measured."""
    server = ServiceProcess(env, command=("serve", "--workers", str(workers))).start()
    try:
        generate(server.url, work, min(WARM_UP_SECONDS, work.seconds))
        return {"workers": workers, **generate(server.url, work, work.seconds)}
    finally:
        server.kill()


def curve(redis_url: str, prefix: str, workers: list[int], work: Load) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            "WANDER_REDIS_URL": redis_url,
            "WANDER_REDIS_PREFIX": prefix,
            "WANDER_DATABASE_URL": f"sqlite:///{scratch}/bench.db",
            "WANDER_LOG_LEVEL": "warning",  # no line per request
        }
        for n in workers:
            row = point(env, n, work)
            print(
                f"{n:>3} worker(s) {row['steps_per_s']:>9,.0f} steps/s  "
                f"p50 {row['p50_ms']:.1f} ms  p99 {row['p99_ms']:.1f} ms  "
                f"errors {row['errors']}",
                flush=True,
            )
            rows.append(row)
    return rows


def markdown(reports: dict[str, dict[str, Any]]) -> str:
    lines = []
    for label, report in reports.items():
        work, host = report["load"], report["machine"]
        count = report.get("primaries", 1)
        cluster = f", a cluster of {count} primaries" if count > 1 else ""
        store = f"Redis {host['redis']}{cluster}"
        endpoint = (
            "`POST /v1/episodes/{id}/step`"
            if work["mode"] == "single"
            else f"`POST /v1/step` ({work['batch']} episodes/request)"
        )
        lines += [
            f"**{label}**: measured {report['date']} on {host['cpu']}, {host['cores']} cores "
            f"(service, Redis and load generator sharing them; load average "
            f"{host['load_average']:.1f} at the start), {store}; "
            f"{work['agents']} agents on {endpoint} from {work['generators']} load "
            f"generator(s), {work['seconds']:g} s per point.",
            "",
            "| workers | steps/s | speedup | ideal | p50 ms | p99 ms | errors |",
            "|---|---|---|---|---|---|---|",
        ]
        first = report["rows"][0]
        for row in report["rows"]:
            lines.append(
                f"| {row['workers']} | {row['steps_per_s']:,.0f} "
                f"| {row['steps_per_s'] / first['steps_per_s']:.2f}x "
                f"| {row['workers'] / first['workers']:.0f}x | {row['p50_ms']:.1f} "
                f"| {row['p99_ms']:.1f} | {row['errors']} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(reports: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, report in reports.items():
        workers = [row["workers"] for row in report["rows"]]
        rates = [row["steps_per_s"] for row in report["rows"]]
        [line] = axes.plot(workers, rates, marker="o", label=label)
        ideal = [rates[0] * n / workers[0] for n in workers]
        axes.plot(workers, ideal, linestyle="--", color=line.get_color(), alpha=0.5,
                  label=f"{label}, ideal")  # fmt: skip
    axes.set_xscale("log", base=2)
    all_workers = sorted({row["workers"] for r in reports.values() for row in r["rows"]})
    axes.set_xticks(all_workers, [str(n) for n in all_workers])
    axes.set_ylim(bottom=0)
    axes.set_xlabel("wander serve --workers")
    axes.set_ylabel("steps/s")
    axes.set_title("Steps/s against service workers")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(results: Path, label: str, report: dict[str, Any]) -> None:
    """This run's JSON, then the table and the curve of every run kept in ``results``."""
    results.mkdir(parents=True, exist_ok=True)
    (results / f"scaling-{label}.json").write_text(json.dumps(report, indent=2) + "\n")
    reports = {
        path.stem.removeprefix("scaling-"): json.loads(path.read_text())
        for path in sorted(results.glob("scaling-*.json"))
    }
    (results / "scaling.md").write_text(markdown(reports))
    plot(reports, results / "scaling.png")


@contextmanager
def store_url(store: str, args: argparse.Namespace) -> Iterator[str]:
    """The ``WANDER_REDIS_URL`` of ``store``: the one given, or a cluster started here
    for as long as its curve runs."""
    if store == "redis":
        yield args.redis_url
    elif args.cluster_url:
        yield args.cluster_url
    else:
        with (
            tempfile.TemporaryDirectory(prefix="wander-bench-cluster-") as directory,
            RedisCluster(Path(directory)) as cluster,
        ):
            yield cluster.url


def measure(redis_url: str, workers: list[int], work: Load) -> dict[str, Any]:
    """One store's curve, its keys deleted afterwards (on every primary of a cluster)."""
    prefix = f"bench:{uuid.uuid4().hex[:8]}:"
    busy = os.getloadavg()[0]  # what else this host was running: other work skews the curve
    nodes = primaries(parse_redis_url(redis_url))
    try:
        rows = curve(redis_url, prefix, workers, work)
    finally:
        for _, client in nodes:
            with client:
                for key in client.scan_iter(match=f"{prefix}*"):
                    client.delete(key)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {**machine(redis_url), "load_average": busy},
        "primaries": len(nodes),
        "load": asdict(work),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="redis,cluster", help="redis and/or cluster")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per point")
    parser.add_argument("--agents", type=int, default=64, help="concurrent agents in all")
    parser.add_argument("--mode", choices=["single", "batch"], default="single")
    parser.add_argument("--batch", type=int, default=64, help="episodes per batch request")
    parser.add_argument("--generators", type=int, default=1, help="load generator processes")
    parser.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--cluster-url",
        default=os.environ.get("BENCH_CLUSTER_URL"),
        help="a redis+cluster:// URL; none: a local cluster of three primaries is started",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write")
    args = parser.parse_args(argv)
    stores = args.stores.split(",")
    if unknown := set(stores) - {"redis", "cluster"}:
        parser.error(f"no store named {', '.join(sorted(unknown))}: redis or cluster")
    work = Load(args.seconds, args.agents, args.mode, args.batch, args.generators)
    workers = [int(n) for n in args.workers.split(",")]
    reports = {}
    for store in stores:
        print(f"{store}:", flush=True)
        with store_url(store, args) as redis_url:
            reports[store] = measure(redis_url, workers, work)
        write(args.results, store, reports[store])
    print(markdown(reports))


if __name__ == "__main__":
    # `kill` then tears down the service this script started, as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
