"""The evaluation runner: play a policy on many episodes concurrently, and summarise."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wander.client.aio import AsyncWanderClient
from wander.client.episode import AsyncEpisode
from wander.client.errors import WanderError
from wander.client.models import CategoricalSummary, NumericSummary
from wander.client.policies.base import Policy
from wander.client.summary import RunAggregate


class EpisodeResult(BaseModel):
    """One line of ``--output``: an episode's score, or why it failed."""

    episode_id: str | None
    example: int
    total: float | None = None
    components: dict[str, float] = {}
    metrics: dict[str, Any] = {}
    error: str | None = None


class EvalSummary(BaseModel):
    env: str
    episodes: int
    errors: int
    reward: NumericSummary | None
    components: dict[str, NumericSummary]
    metrics: dict[str, NumericSummary | CategoricalSummary]
    """For tic-tac-toe: ``outcome`` rates, ``invalid_moves`` (``nonzero_rate``: the
    share of games with an invalid move), ``turns``..."""


class Evaluation(BaseModel):
    results: list[EpisodeResult]
    summary: EvalSummary

    def save_jsonl(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for result in self.results:
                out.write(json.dumps(result.model_dump(exclude_none=True)) + "\n")


async def evaluate(
    client: AsyncWanderClient,
    env: str,
    policy: Policy,
    *,
    examples: int | Sequence[int] = 10,
    rollouts: int = 1,
    concurrency: int = 16,
    config: Mapping[str, Any] | None = None,
    split: str = "eval",
    run: str | None = None,
    progress: bool = True,
) -> Evaluation:
    """Play ``rollouts`` episodes (one group) of each example with ``policy``.

    ``examples``: a count (the first N examples of ``split``) or explicit indices.
    At most ``concurrency`` episodes are in play at once. An episode that fails
    (the policy or the service raised) is aborted and counted in ``errors``; its
    result's ``error`` names the exception's class and message.
    """
    indices = list(range(examples)) if isinstance(examples, int) else list(examples)
    info = await client.environment(env)
    tools = info.tools
    slots = asyncio.Semaphore(concurrency)
    bar = Progress(
        TextColumn(f"[bold]{env}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        disable=not progress,
    )  # fmt: skip

    async def play(episode: AsyncEpisode) -> EpisodeResult:
        try:
            while not episode.done:
                await episode.step(await policy.act(episode.messages, tools))
            score = await episode.score()
        except Exception as exc:  # the policy's failures are as varied as its backends
            with contextlib.suppress(WanderError):
                await episode.delete()  # abort it; it would expire anyway
            return EpisodeResult(episode_id=episode.id, example=episode.example, error=_reason(exc))
        return EpisodeResult(
            episode_id=episode.id,
            example=episode.example,
            total=score.total,
            components=score.components,
            metrics=score.metrics,
        )

    async def example_group(index: int, task: Any) -> list[EpisodeResult]:
        async with slots:
            try:
                group = await client.create(
                    env, config=config, split=split, example=index, n=rollouts, run=run
                )
            except WanderError as exc:
                bar.advance(task, rollouts)
                failed = EpisodeResult(episode_id=None, example=index, error=_reason(exc))
                return [failed.model_copy() for _ in range(rollouts)]
        results = []
        for done in asyncio.as_completed([_limited(slots, play(ep)) for ep in group]):
            results.append(await done)
            bar.advance(task)
        return results

    with bar:
        task = bar.add_task(env, total=len(indices) * rollouts)
        groups = await asyncio.gather(*(example_group(i, task) for i in indices))
    results = sorted((r for group in groups for r in group), key=lambda r: r.example)
    return Evaluation(results=results, summary=summarize(env, results))


def summarize(env: str, results: Sequence[EpisodeResult]) -> EvalSummary:
    scored = RunAggregate()
    for result in results:
        if result.error is None and result.total is not None:
            scored.add(result.total, result.components, result.metrics)
    return EvalSummary(
        env=env,
        episodes=len(results),
        errors=sum(result.error is not None for result in results),
        reward=scored.reward(),
        components=scored.component_summaries(),
        metrics=scored.metric_summaries(),
    )


def _reason(exc: Exception) -> str:
    """``PolicyEndpointError: the policy endpoint at ... cannot be reached: ...``: whose
    failure it was, then what the error says."""
    return f"{type(exc).__name__}: {exc}"


async def _limited(slots: asyncio.Semaphore, coroutine: Any) -> EpisodeResult:
    async with slots:
        return await coroutine
