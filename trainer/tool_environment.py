"""TRL's ``environment_factory`` over a Wander tool environment (TRL 1.16).

In this path TRL plays the episode itself: it renders the prompt with the tools'
schemas, generates, parses the model's tool calls, calls the environment's
methods and feeds their replies back, until the model answers without a tool
call. Wander keeps what it adds: every rollout is a Wander episode (per-turn
seeds, the run label, the archive and its summaries), and the reward is
Wander's score.

- ``tool_environment(client, env, ...)`` fetches the environment's tool schemas
  from the service and makes the class TRL takes as ``environment_factory``:
  one public method per tool (``tool_methods``), everything else private (TRL
  makes every public method a tool).
- ``reset(**row)`` creates the episode of the dataset row's ``example`` (and
  ``seed``, when the row has one; otherwise the service derives it from the
  example). TRL repeats each row for the ``num_generations`` rollouts of a GRPO
  group, so the members of a group start from the same position.
- Each tool call is one Wander step holding that one tool call; the method
  returns the text of the step's observation (the tool's reply).
- ``wander_score`` is the reward function. TRL never hands the model's final,
  tool-free message to the environment, and in a tool environment that message
  is the answer being graded (``sql``: ``<answer>...</answer>``). TRL's other
  hook, ``get_reward``, takes no arguments and so never sees it either; a reward
  function receives both the ``completions`` and the ``environments``, so this
  one sends the final message as the episode's last step (which ends the
  episode: scored and archived under the run) and returns Wander's score total.
  A rollout TRL cut short (out of tokens or tool-call iterations, its last
  message still a tool call or a tool reply) is aborted instead: archived as
  ``aborted``, rewarded with the score it reached.
"""

from __future__ import annotations

import copyreg
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from wander.client import Episode, Score, WanderClient
from wander.client.models import storable, text_of, tool_call
from wander.trainer.tool_methods import tool_method


class WanderToolEnvironment:
    """One rollout's Wander episode, as TRL's ``environment_factory`` drives it.

    TRL makes one instance per concurrent rollout and reuses it: ``reset`` starts
    every rollout. Subclasses made by ``tool_environment`` add the tools and the
    service to talk to.
    """

    _client: ClassVar[WanderClient]
    _env: ClassVar[str]
    _episode_options: ClassVar[dict[str, Any]]
    """``config``, ``split`` and ``run`` of every episode created."""

    def __init__(self) -> None:
        self._episode: Episode | None = None

    def reset(self, **row: Any) -> str:
        """Create the episode of ``row["example"]`` (with ``row["seed"]``, if given) and
        return its opening messages' text, which TRL appends to the prompt's last user
        message. An episode of this instance left unscored (a trainer without
        ``wander_score``) is aborted first, so none stays open in the store."""
        if "example" not in row:
            raise ValueError(
                "each dataset row needs an `example` column: the index of the Wander "
                f"example the rollout plays (the row has {sorted(row)})"
            )
        if self._episode is not None and not self._episode.done:
            self._episode.delete()
        [self._episode] = self._client.create(
            self._env, example=int(row["example"]), seed=row.get("seed"), **self._episode_options
        )
        return text_of(self._episode.observation)

    def _current(self) -> Episode:
        if self._episode is None:
            raise RuntimeError("reset() starts an episode before its tools are called")
        return self._episode

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """One Wander step holding this one tool call; the text of what the environment
        answered. TRL reports an exception to the model as the call's error."""
        episode = self._current()
        if episode.done:
            raise RuntimeError("the episode has ended; no more tool calls are run")
        result = episode.step(tool_call(f"call_{episode.turn}", name, arguments))
        return text_of(result.observation)

    def _finish(self, last: Mapping[str, Any]) -> Score:
        """End the episode with the rollout's ``last`` message, and its score: a final
        answer (an assistant message without tool calls) is its last step; anything
        else means TRL cut the rollout short, and the episode is aborted."""
        episode = self._current()
        if not episode.done:
            if last.get("role") == "assistant" and not last.get("tool_calls"):
                episode.step(storable(str(last.get("content") or "")))
            else:
                episode.delete()
        self._episode = None  # over: the next reset has nothing to abort
        return episode.score()


class ToolEnvironmentType(type):
    """The type of the classes ``tool_environment`` makes. Such a class exists only in
    the process that made it, so it pickles as the call that makes it again (TRL's
    ``AsyncGRPOTrainer`` sends its ``environment_factory`` to a worker process): the
    service's URL, the environment and its episodes' options, its tools fetched anew
    where it is unpickled (the API key read there from ``WANDER_API_KEY``)."""


def _made_again(url: str, env: str, options: dict[str, Any]) -> type[WanderToolEnvironment]:
    return tool_environment(WanderClient(url), env, **options)


def _pickled(cls: ToolEnvironmentType) -> tuple[Any, ...]:
    return _made_again, (cls._client.base_url, cls._env, cls._episode_options)  # type: ignore[attr-defined]


copyreg.pickle(ToolEnvironmentType, _pickled)


def class_name(env: str) -> str:
    """``sql`` -> ``SqlEnvironment``, ``rg/chain_sum`` -> ``RgChainSumEnvironment``."""
    return "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", env)) + "Environment"


def tool_environment(
    client: WanderClient,
    env: str,
    *,
    config: Mapping[str, Any] | None = None,
    split: str = "train",
    run: str | None = None,
) -> type[WanderToolEnvironment]:
    """The ``environment_factory`` for ``env``: a class with one method per tool the
    service publishes for it, whose episodes are created with ``config``, ``split``
    and the ``run`` label. Raises ValueError for an environment without tools."""
    info = client.environment(env)
    if info.kind != "tool" or not info.tools:
        raise ValueError(
            f"{env} is a {info.kind} environment without tools; environment_factory plays "
            'tool environments (train it with rollout = "rollout_func")'
        )
    name = class_name(env)
    attributes: dict[str, Any] = {
        "__doc__": f"Episodes of Wander's {env} for TRL: {info.description}",
        "__module__": __name__,
        "__qualname__": name,
        "_client": client,
        "_env": env,
        "_episode_options": {"config": config, "split": split, "run": run},
    }
    for tool in info.tools:
        method = tool_method(tool)
        attributes[method.__name__] = method
    return ToolEnvironmentType(name, (WanderToolEnvironment,), attributes)


FINISHING_THREADS = 16
"""How many of a batch's episodes ``score_reward`` finishes at once."""


def score_reward(
    kind: type[WanderToolEnvironment] = WanderToolEnvironment, name: str = "wander_score"
) -> Callable[..., list[float | None]]:
    """A TRL reward function over the rollouts of ``kind`` (of every Wander tool
    environment by default; of exactly that class when a run has several): it finishes
    each one's episode with its last message and returns Wander's score total (None
    for a rollout of another class). Logs the mean of each score component
    (``wander/<component>``, or ``wander/<name>/<component>`` for one class) and each
    completion's episode id (``wander_episode``, or ``wander_episode/<name>``, in
    TRL's completions table)."""
    scope = "" if kind is WanderToolEnvironment else f"{name}/"

    def mine(environment: Any) -> bool:
        if kind is WanderToolEnvironment:
            return isinstance(environment, WanderToolEnvironment)
        return type(environment) is kind

    def reward(
        completions: Sequence[Sequence[Mapping[str, Any]]],
        environments: Sequence[Any],
        log_metric: Callable[[str, float], None] | None = None,
        log_extra: Callable[[str, list[Any]], None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        def finish(completion: Sequence[Mapping[str, Any]], environment: Any) -> Score | None:
            return environment._finish(completion[-1]) if mine(environment) else None

        # Each finish is a round trip or two (the last step, the score): the batch's
        # overlap, where one by one they would add up (TRL calls a reward function once
        # per batch, and its tool calls one at a time).
        with ThreadPoolExecutor(FINISHING_THREADS) as pool:
            scores = list(pool.map(finish, completions, environments))
        if log_metric is not None:
            by_component: dict[str, list[float]] = {}
            for score in scores:
                for component, value in (score.components if score else {}).items():
                    by_component.setdefault(component, []).append(value)
            for component, values in by_component.items():
                log_metric(f"wander/{scope}{component}", sum(values) / len(values))
        if log_extra is not None:
            column = f"wander_episode/{name}" if scope else "wander_episode"
            log_extra(column, [score.episode_id if score else None for score in scores])
        return [score.total if score else None for score in scores]

    reward.__name__ = name
    return reward


wander_score = score_reward()
"""The reward function of a run on one tool environment."""
