"""Smoke test of the scaling bench (`make bench-scaling`): one point, one worker, one
second, on the suite's Redis; it writes the JSON, the table and the curve, and leaves
no key behind. It measures nothing: the numbers belong in bench/results/."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from bench.scaling import main


def test_one_point_of_the_curve_is_measured_and_written(redis_url: str, tmp_path: Path) -> None:
    keys_before = set(redis.Redis.from_url(redis_url).scan_iter(match="bench:*"))
    main(["--workers", "1", "--seconds", "1", "--agents", "4", "--redis-url", redis_url,
          "--label", "smoke", "--results", str(tmp_path)])  # fmt: skip
    report = json.loads((tmp_path / "scaling-smoke.json").read_text())
    [row] = report["rows"]
    assert row["workers"] == 1 and row["errors"] == 0
    assert row["steps"] > 0 and row["steps_per_s"] > 0
    assert report["load"] == {"seconds": 1.0, "agents": 4, "mode": "single", "batch": 64,
                              "generators": 1}  # fmt: skip
    assert "| 1 | " in (tmp_path / "scaling.md").read_text()
    assert (tmp_path / "scaling.png").read_bytes().startswith(b"\x89PNG")
    assert set(redis.Redis.from_url(redis_url).scan_iter(match="bench:*")) == keys_before
