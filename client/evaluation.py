"""The evaluation runner: play a policy on many episodes concurrently, and summarise."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wander.client.aio import AsyncWanderClient
from wander.client.episode import AsyncEpisode
from wander.client.errors import WanderError
from wander.client.models import CategoricalSummary, NumericSummary
from wander.client.policies.base import Policy, for_episode, plays
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
    At most ``concurrency`` episodes are open at once (a group larger than that is
    played alone). An episode that fails (the policy or the service raised) is aborted
    and counted in ``errors``; its result's ``error`` names the exception's class and
    message. Interrupted (cancelled, Ctrl-C), it aborts every episode it left open
    before it returns. ``ValueError`` before anything is played when ``policy`` cannot
    play ``env`` (a tic-tac-toe baseline elsewhere).
    """
    info = await client.environment(env)
    if not plays(policy, env):
        raise ValueError(f"{type(policy).__name__} cannot play {env!r}: it plays tictactoe")
    indices = list(range(examples)) if isinstance(examples, int) else list(examples)
    tools = info.tools
    room = Room(concurrency)
    open_episodes: dict[str, AsyncEpisode] = {}
    bar = Progress(
        TextColumn(f"[bold]{env}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        disable=not progress,
    )  # fmt: skip

    async def play(episode: AsyncEpisode, player: Policy) -> EpisodeResult:
        """The episode to its end, or aborted where it failed; cancelled, it stays open
        (``_abort`` aborts it with the others)."""
        try:
            while not episode.done:
                await episode.step(await player.act(episode.messages, tools))
            score = await episode.score()
        except Exception as exc:  # the policy's failures are as varied as its backends
            with contextlib.suppress(WanderError):
                await episode.delete()  # abort it; it would expire anyway
            error = _reason(exc)
            result = EpisodeResult(episode_id=episode.id, example=episode.example, error=error)
        else:
            result = EpisodeResult(
                episode_id=episode.id,
                example=episode.example,
                total=score.total,
                components=score.components,
                metrics=score.metrics,
            )
        open_episodes.pop(episode.id, None)
        room.leave()
        bar.advance(task)
        return result

    async def example_group(index: int) -> list[EpisodeResult]:
        await room.enter(rollouts)
        try:
            group = await client.create(
                env, config=config, split=split, example=index, n=rollouts, run=run
            )
        except WanderError as exc:
            room.leave(rollouts)
            bar.advance(task, rollouts)
            failed = EpisodeResult(episode_id=None, example=index, error=_reason(exc))
            return [failed.model_copy() for _ in range(rollouts)]
        except BaseException:
            room.leave(rollouts)
            raise
        open_episodes.update((episode.id, episode) for episode in group)
        players = [for_episode(policy, index, rollout) for rollout in range(len(group))]
        return list(await asyncio.gather(*map(play, group, players)))

    with bar:
        task = bar.add_task(env, total=len(indices) * rollouts)
        try:
            groups = await asyncio.gather(*map(example_group, indices))
        finally:
            await _abort(list(open_episodes.values()))
    results = sorted((r for group in groups for r in group), key=lambda r: r.example)
    return Evaluation(results=results, summary=summarize(env, results))


class Room:
    """At most ``size`` episodes open at once: a group enters with all its episodes
    (alone, if it is larger than ``size``), in the order the groups asked; each episode
    leaves as it ends."""

    def __init__(self, size: int) -> None:
        self.size, self.inside = size, 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def enter(self, count: int) -> None:
        if not self._waiting and self._fits(count):
            self.inside += count
            return
        entered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((count, entered))
        try:
            await entered
        except asyncio.CancelledError:
            if entered.done() and not entered.cancelled():
                self.leave(count)  # let in just as it was cancelled
            raise

    def leave(self, count: int = 1) -> None:
        self.inside -= count
        while self._waiting:
            wanted, entered = self._waiting[0]
            if entered.done():  # cancelled while it waited
                self._waiting.popleft()
            elif self._fits(wanted):
                self._waiting.popleft()
                self.inside += wanted
                entered.set_result(None)
            else:
                return

    def _fits(self, count: int) -> bool:
        return self.inside == 0 or self.inside + count <= self.size


ABORT_SECONDS = 10.0
"""How long an interrupted evaluation waits for its open episodes to be aborted."""


async def _abort(episodes: list[AsyncEpisode]) -> None:
    """Abort the episodes an interrupted evaluation left open (they would count against
    the tenant's live-episode quota until they expire); what cannot be reached expires."""
    if not episodes:
        return
    aborts = asyncio.gather(*(episode.delete() for episode in episodes), return_exceptions=True)
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(aborts), ABORT_SECONDS)


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
