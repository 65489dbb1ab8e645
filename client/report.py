"""How an evaluation is shown: a terminal table and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from wander.client.evaluation import EvalSummary, Evaluation
from wander.client.models import CategoricalSummary, NumericSummary
from wander.extras import install_command


def summary_table(summary: EvalSummary) -> Table:
    """Reward, each component and each metric: mean ± std and range, or value rates."""
    scored = summary.episodes - summary.errors
    table = Table(title=f"{summary.env}: {scored} episodes scored, {summary.errors} errors")
    for column in ("", "mean", "std", "min", "max"):
        table.add_column(column, justify="left" if not column else "right")

    def numeric(name: str, stats: NumericSummary) -> None:
        table.add_row(
            name, *(f"{value:.3f}" for value in (stats.mean, stats.std, stats.min, stats.max))
        )

    if summary.reward is not None:
        numeric("reward", summary.reward)
    for name, stats in summary.components.items():
        numeric(f"  {name}", stats)
    for name, metric in summary.metrics.items():
        if isinstance(metric, CategoricalSummary):
            for value, rate in ordered_rates(metric).items():
                table.add_row(f"{name} = {value}", f"{rate:.1%}", "", "", "")
        else:
            numeric(name, metric)
            if name == "invalid_moves":
                table.add_row(
                    "games with an invalid move", f"{metric.nonzero_rate:.1%}", "", "", ""
                )
    return table


def failures(evaluation: Evaluation) -> str | None:
    """How many episodes failed and the first one's error; None when none did."""
    errors = [result.error for result in evaluation.results if result.error is not None]
    if not errors:
        return None
    count = len(evaluation.results)
    return f"{len(errors)} of {count} episodes failed; the first error: {errors[0]}"


def require_plotting() -> None:
    """Raise now what ``plot`` would raise, so that a missing extra is found before an
    evaluation rather than after it."""
    _pyplot()


def plot(evaluation: Evaluation, path: Path) -> None:
    """A PNG of the reward distribution, and of the outcome rates where there are some."""
    plt = _pyplot()
    summary = evaluation.summary
    totals = [r.total for r in evaluation.results if r.total is not None]
    outcome = summary.metrics.get("outcome")
    panels = 2 if isinstance(outcome, CategoricalSummary) else 1
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
    rewards = axes[0][0]
    rewards.hist(totals, bins=min(30, max(5, len(set(totals)))), color="#4c72b0", edgecolor="white")
    rewards.set(title=f"{summary.env}: total reward", xlabel="reward", ylabel="episodes")
    if isinstance(outcome, CategoricalSummary):
        bars = axes[0][1]
        rates = ordered_rates(outcome)
        bars.bar(list(rates), list(rates.values()), color="#55a868")
        bars.set(title="outcomes", ylabel="share of episodes", ylim=(0, 1.12))
        for index, rate in enumerate(rates.values()):
            bars.annotate(f"{rate:.0%}", (index, rate), ha="center", va="bottom")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _pyplot() -> Any:
    """matplotlib's pyplot, drawing to files only; without matplotlib, an ImportError
    that names the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"plots need matplotlib: {install_command('plot')}", name=exc.name
        ) from exc
    return plt


def ordered_rates(metric: CategoricalSummary) -> dict[str, float]:
    """Outcomes as people read them: win, draw and loss first and always (zeros
    included) where any of them occurs, then the other values."""
    known = {name: metric.rates.get(name, 0.0) for name in ("win", "draw", "loss")}
    if not set(metric.rates) & set(known):
        known = {}
    return known | {name: rate for name, rate in metric.rates.items() if name not in known}
