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

- A tool environment's tools (``sql``) reach the model as an MCP server of the
  rollout's own (``WanderTools``, wander/client/verifiers_tools.py): each tool call is a
  step of the rollout's episode, and the model's reply after its tool calls (its answer)
  is the next step, as in Wander's own rollout. The episode's id and turn travel in the
  rollout's ``WanderState``, which Verifiers shares between this host and the tool
  server; a tool call that ends the episode stops the harness before its next model call.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)
from pydantic import Field

from wander.client.aio import AsyncWanderClient
from wander.client.errors import WanderError
from wander.client.models import Message, NewEpisode, Score
from wander.client.sync import WanderClient
from wander.client.verifiers_tools import WanderState, WanderTools

__all__ = [
    "WanderConfig",
    "WanderData",
    "WanderEnv",
    "WanderEnvConfig",
    "WanderState",
    "WanderTask",
    "WanderTaskConfig",
    "WanderTaskset",
]


class WanderTaskConfig(vf.TaskConfig):
    """``[env.taskset.task]``: how a task's tools are served."""

    toolset: vf.ToolsetConfig = vf.ToolsetConfig()
    """Where a tool environment's tool server runs (by default a local subprocess per
    rollout)."""
    tools: bool = False
    """Whether the task's environment has tools: set by the taskset, from the service."""


class WanderConfig(vf.TasksetConfig):
    """``[env.taskset]`` of a run with ``id = "wander"``; every field has a default."""

    task: WanderTaskConfig = WanderTaskConfig()

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
    tools: list[dict[str, Any]] = []
    """The environment's tools (OpenAI schemas): what the rollout's tool server publishes."""


class WanderTask(vf.Task[WanderData, WanderState, WanderTaskConfig]):
    @classmethod
    def toolsets(cls, config: WanderTaskConfig) -> list[vf.Toolset]:
        """A tool environment's tools, as one MCP server per rollout; none for a text
        environment."""
        return [WanderTools(config.toolset)] if config.tools else []

    @vf.stop
    def episode_over(self, trace: vf.Trace) -> bool:
        """A tool call ended the episode (its turn limit, say): the model is not asked
        again."""
        return bool(trace.state.done)


class WanderTaskset(vf.Taskset[WanderTask, WanderConfig]):
    """The examples of one split of one Wander environment, as prompt-less tasks."""

    def load(self) -> Iterator[WanderTask]:
        config = self.config
        with WanderClient(config.url) as wander:
            info = wander.environment(config.env)
            url = wander.base_url
        task_config = config.task.model_copy(update={"tools": bool(info.tools)})
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
                tools=info.tools or [],
            )
            yield WanderTask(data, task_config)


class WanderEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())
    """The model's seat: by default the `null` harness (a plain chat loop, calling the
    task's MCP tools if it has any) in a local subprocess, as Wander's environments need
    nothing more, and the run stays on this machine."""


class WanderEnv(vf.Env[WanderEnvConfig]):
    """One rollout is one Wander episode, played turn by turn over REST."""

    async def run(self, task: WanderTask, agents: vf.Agents) -> None:
        data = task.data
        api_key = os.environ.get("WANDER_API_KEY")
        async with AsyncWanderClient(data.url, api_key) as wander:
            [episode] = await wander.create(
                data.env, config=data.config, split=data.split, example=data.example,
                run=run_label(data),
            )  # fmt: skip
            state = WanderState(episode_id=episode.id, turn=episode.turn, api_key=api_key)
            try:
                async with agents.player.interaction(task) as interaction:
                    interaction.trace.state = state  # where the tool server finds its episode
                    state = await _play(interaction, wander, episode)
                    score = await wander.score(episode.id, partial=not state.done)
                    _record(interaction.trace, episode, state, score)
            finally:
                if not state.done:  # the agent stopped first: abort, so it is archived
                    with contextlib.suppress(WanderError):
                        await wander.delete(episode.id)


def run_label(data: WanderData) -> str | None:
    """The task's run label, else one naming the Verifiers run (set by ``vf-eval``)."""
    run_id = os.environ.get("VF_RUN_ID")
    return data.run or (f"vf-{run_id}" if run_id else None)


def _chat(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [message.model_dump(mode="json") for message in messages]


async def _play(
    interaction: vf.Interaction, wander: AsyncWanderClient, episode: NewEpisode
) -> WanderState:
    """The model answers each observation until the episode is done or the agent stops
    (a turn or token limit): the final observation is not shown, nothing would read it.
    The turn to step at is the rollout's state's: a tool server moves it on with each
    tool call the model makes during its turn. Returns the state as the rollout ends."""
    segment = await interaction.turn(_chat(episode.observation))
    while not (segment.terminated or (state := interaction.trace.state).done):
        result = await wander.step(episode.id, segment.last_reply, turn=state.turn)
        state.turn, state.done = result.turn, result.done
        if result.done:
            break
        segment = await interaction.turn(_chat(result.observation))
    return interaction.trace.state


def _record(trace: vf.Trace, episode: NewEpisode, state: WanderState, score: Score) -> None:
    for name, value in score.components.items():
        trace.record_reward(name, value, score.weights[name])
    numbers = {k: float(v) for k, v in score.metrics.items() if isinstance(v, int | float)}
    trace.record_metrics(numbers)
    trace.info["wander"] = {
        "episode_id": episode.id,
        "run": episode.run,
        "done": state.done,
        "total": score.total,
        "outcome": score.outcome,
        "metrics": score.metrics,
    }
