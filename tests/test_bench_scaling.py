"""Smoke test of the scaling bench (`make bench-scaling`): one point, one worker, one
second, on the suite's Redis and on a cluster the bench starts itself; it writes the
JSON, the table and the curve, and leaves no key (and no cluster) behind. It measures
nothing: the numbers belong in bench/results/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import redis

from bench.scaling import main
from wander.testing import running_processes


def test_one_point_of_the_curve_is_measured_and_written(redis_url: str, tmp_path: Path) -> None:
    keys_before = set(redis.Redis.from_url(redis_url).scan_iter(match="bench:*"))
    main(["--stores", "redis", "--workers", "1", "--seconds", "1", "--agents", "4",
          "--redis-url", redis_url, "--results", str(tmp_path)])  # fmt: skip
    report = json.loads((tmp_path / "scaling-redis.json").read_text())
    [row] = report["rows"]
    assert row["workers"] == 1 and row["errors"] == 0
    assert row["steps"] > 0 and row["steps_per_s"] > 0
    assert report["load"] == {"seconds": 1.0, "agents": 4, "mode": "single", "batch": 64,
                              "generators": 1}  # fmt: skip
    assert report["primaries"] == 1
    assert "| 1 | " in (tmp_path / "scaling.md").read_text()
    assert (tmp_path / "scaling.png").read_bytes().startswith(b"\x89PNG")
    assert set(redis.Redis.from_url(redis_url).scan_iter(match="bench:*")) == keys_before


def test_the_cluster_curve_runs_on_a_cluster_of_its_own(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server installed: the bench cannot start a cluster")
    main(["--stores", "cluster", "--workers", "1", "--seconds", "1", "--agents", "4",
          "--results", str(tmp_path)])  # fmt: skip
    report = json.loads((tmp_path / "scaling-cluster.json").read_text())
    [row] = report["rows"]
    assert report["primaries"] == 3
    assert row["errors"] == 0 and row["steps"] > 0
    assert "a cluster of 3 primaries" in (tmp_path / "scaling.md").read_text()
    assert not [p for p in running_processes() if "wander-bench-cluster-" in p.command]
