"""Wander as a Verifiers 0.4 taskset: ``vf-eval wander`` plays a running service.

Verifiers finds a taskset by importing the top-level module named after its id and
taking the one ``Taskset`` subclass (and the ``Env`` subclass) in its ``__all__``:
``cli/__init__.py`` (the package ``wander``) exports ``WanderTaskset`` and ``WanderEnv``
from here, lazily, so that the base install never imports verifiers
(the ``verifiers`` extra brings it).

- A task is one example of a split of one environment (``examples`` of them, from 0).
- ``WanderEnv`` plays the user: it creates the task's episode over REST, opens the
  model's conversation with the episode's first observation (system and user messages:
  a task has no prompt of its own), sends each reply as a step and the environment's
  answer as the next user turn, until the episode is done.
- The rewards of the rollout are Wander's score components, each with its weight, so
  Verifiers' reward (the weighted sum) is Wander's total; numeric metrics become
  Verifiers metrics; the episode's id, run label, outcome and metrics are in the
  trace's ``info["wander"]``.
- Episodes carry the run label ``run``, or ``vf-<Verifiers run id>``, so the archive's
  run summary describes the same rollouts as ``traces.jsonl``.

Tool environments (``sql``) are refused: their tools would have to be published to the
harness as an MCP server; use their OpenEnv surface or TRL's ``environment_factory``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)
from pydantic import Field

from wander.client.aio import AsyncWanderClient
from wander.client.episode import AsyncEpisode
from wander.client.errors import WanderError
from wander.client.models import Message, Score
from wander.client.sync import WanderClient

__all__ = [
    "WanderConfig",
    "WanderData",
    "WanderEnv",
    "WanderEnvConfig",
    "WanderTask",
    "WanderTaskset",
]


class WanderConfig(vf.TasksetConfig):
    """``[env.taskset]`` of a run with ``id = "wander"``; every field has a default."""

    url: str | None = None
    """The service (unset: $WANDER_URL, else http://127.0.0.1:8000). An API key, if the
    service wants one, is read from $WANDER_API_KEY, never from a config."""
    env: str = "tictactoe"
    """The Wander environment to play (`wander envs` lists them)."""
    split: str = "eval"
    """The split whose examples are the tasks."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The environment's config, as POST /v1/episodes takes it."""
    examples: int | None = Field(None, ge=1)
    """The tasks are examples 0 to examples-1 (unset: the whole split, at the size the
    service reports for the default config)."""
    run: str | None = None
    """The run label of the episodes in Wander's archive (unset: vf-<Verifiers' run id>)."""


class WanderData(vf.TaskData):
    url: str
    env: str
    split: str
    example: int
    config: dict[str, Any]
    run: str | None


class WanderTask(vf.Task[WanderData]):
    pass


class WanderTaskset(vf.Taskset[WanderTask, WanderConfig]):
    """The examples of one split of one Wander environment, as prompt-less tasks."""

    def load(self) -> Iterator[WanderTask]:
        config = self.config
        with WanderClient(config.url) as wander:
            info = wander.environment(config.env)
            url = wander.base_url
        if info.kind == "tool":
            raise ValueError(
                f"{config.env} is a tool environment: the wander taskset plays text "
                "environments only (use its OpenEnv surface, or TRL's environment_factory)"
            )
        if config.split not in info.splits:
            raise ValueError(f"{config.env} has no split {config.split!r} (it has {info.splits})")
        for example in range(config.examples or info.splits[config.split]):
            data = WanderData(
                name=f"{config.env}/{config.split}#{example}",
                prompt=None,  # the environment opens the conversation (WanderEnv.run)
                url=url,
                env=config.env,
                split=config.split,
                example=example,
                config=config.config,
                run=config.run,
            )
            yield WanderTask(data, config.task)


class WanderEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())
    """The model's seat: by default the `null` harness (a plain chat loop, no tools) in a
    local subprocess, as Wander's text environments need nothing more, and the run stays
    on this machine."""


class WanderEnv(vf.Env[WanderEnvConfig]):
    """One rollout is one Wander episode, played turn by turn over REST."""

    async def run(self, task: WanderTask, agents: vf.Agents) -> None:
        data = task.data
        async with AsyncWanderClient(data.url) as wander:
            [episode] = await wander.create(
                data.env, config=data.config, split=data.split, example=data.example,
                run=run_label(data),
            )  # fmt: skip
            try:
                async with agents.player.interaction(task) as interaction:
                    await _play(interaction, episode)
                    score = await episode.score(partial=not episode.done)
                    _record(interaction.trace, episode, score)
            finally:
                if not episode.done:  # the agent stopped first: abort, so it is archived
                    with contextlib.suppress(WanderError):
                        await episode.delete()


def run_label(data: WanderData) -> str | None:
    """The task's run label, else one naming the Verifiers run (set by ``vf-eval``)."""
    run_id = os.environ.get("VF_RUN_ID")
    return data.run or (f"vf-{run_id}" if run_id else None)


def _chat(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [message.model_dump(mode="json") for message in messages]


async def _play(interaction: vf.Interaction, episode: AsyncEpisode) -> None:
    """The model answers each observation until the episode is done or the agent stops
    (a turn or token limit): the final observation is not shown, nothing would read it."""
    segment = await interaction.turn(_chat(episode.observation))
    while not segment.terminated:
        result = await episode.step(segment.last_reply)
        if result.done:
            return
        segment = await interaction.turn(_chat(result.observation))


def _record(trace: vf.Trace, episode: AsyncEpisode, score: Score) -> None:
    for name, value in score.components.items():
        trace.record_reward(name, value, score.weights[name])
    numbers = {k: float(v) for k, v in score.metrics.items() if isinstance(v, int | float)}
    trace.record_metrics(numbers)
    trace.info["wander"] = {
        "episode_id": episode.id,
        "run": episode.run,
        "done": episode.done,
        "total": score.total,
        "outcome": score.outcome,
        "metrics": score.metrics,
    }
