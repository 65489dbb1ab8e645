"""Summaries of many episodes: reward, component means and metric distributions.

Shared by the archive's run summaries and the evaluation runner, so that the two
agree by construction."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from wander.client.models import CategoricalSummary, NumericSummary


class RunAggregate:
    """Collects the scores of finished episodes one at a time."""

    def __init__(self) -> None:
        self.count = 0
        self.rewards: list[float] = []
        self.components: defaultdict[str, list[float]] = defaultdict(list)
        self.metrics: defaultdict[str, list[Any]] = defaultdict(list)

    def add(
        self, total: float, components: Mapping[str, float], metrics: Mapping[str, Any]
    ) -> None:
        self.count += 1
        self.rewards.append(total)
        for name, value in components.items():
            self.components[name].append(value)
        for name, value in metrics.items():
            self.metrics[name].append(value)

    def reward(self) -> NumericSummary | None:
        return numeric_summary(self.rewards) if self.rewards else None

    def component_summaries(self) -> dict[str, NumericSummary]:
        return {name: numeric_summary(values) for name, values in self.components.items()}

    def component_means(self) -> dict[str, float]:
        return {name: math.fsum(values) / len(values) for name, values in self.components.items()}

    def metric_summaries(self) -> dict[str, NumericSummary | CategoricalSummary]:
        return {name: metric_summary(values) for name, values in self.metrics.items()}


def numeric_summary(values: Iterable[float]) -> NumericSummary:
    values = list(values)
    return NumericSummary(
        mean=math.fsum(values) / len(values),
        std=statistics.pstdev(values),
        min=min(values),
        max=max(values),
        nonzero_rate=sum(1 for v in values if v != 0) / len(values),
    )


def metric_summary(values: list[Any]) -> NumericSummary | CategoricalSummary:
    """Numbers get a distribution; anything else (text, booleans, null) the rate of each value."""
    if all(_is_number(v) for v in values):
        return numeric_summary(values)
    counts = Counter(_category(v) for v in values)
    return CategoricalSummary(rates={key: n / len(values) for key, n in sorted(counts.items())})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _category(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value)
