"""The environment SDK (docs/environments.md, "The contract").

An environment is a deterministic state machine over chat messages. Instances
hold no per-episode state: everything an episode needs lives in a
JSON-serialisable ``state`` dict that the engine loads and saves around every
call, which is what lets any replica serve any step. Environments know nothing
of HTTP, stores or archives.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field

from wander.service.envs.seeding import TurnRandom

Message = dict[str, Any]
"""A chat message in the OpenAI shape: ``{role, content, tool_calls?, tool_call_id?, name?}``."""

State = dict[str, Any]
"""An episode's JSON-serialisable state, owned by the environment."""

EnvKind = Literal["single_turn", "multi_turn", "tool"]

Isolation = Literal["inline", "process"]
"""How an environment runs: see ``Environment.isolation``."""


class EnvConfig(BaseModel):
    """Base of every environment's config; unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, description="Dataset seed: part of every example's seed.")


class SizedConfig(EnvConfig):
    """A config for a generated dataset whose split sizes are the user's to choose."""

    train_size: int = Field(10_000, ge=1, le=10_000_000, description="Examples in `train`.")
    eval_size: int = Field(1_000, ge=1, le=10_000_000, description="Examples in `eval`.")

    def split_size(self, split: str) -> int:
        return {"train": self.train_size, "eval": self.eval_size}[split]


ConfigT = TypeVar("ConfigT", bound=EnvConfig)


T = TypeVar("T")


class GeneratedExamples(Sequence[T]):
    """A dataset of ``size`` examples made on demand by ``make(index)``: procedural
    datasets cost nothing until an example is played, however large they are."""

    def __init__(self, size: int, make: Callable[[int], T]) -> None:
        self._size, self._make = size, make

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._make(i) for i in range(*index.indices(self._size))]
        if not -self._size <= index < self._size:
            raise IndexError(index)
        return self._make(index % self._size)


class Reset(NamedTuple):
    """What ``reset`` returns: the initial state and the opening messages."""

    state: State
    messages: list[Message]


class Transition(NamedTuple):
    """What ``step`` returns: the new state, the environment's reply and whether it ended.

    ``invalid`` says the action broke the environment's rules (an occupied cell, a
    missing tag): the engine counts it (``wander_invalid_actions_total``) without
    reading the environment's private state.
    """

    state: State
    messages: list[Message]
    done: bool
    invalid: bool = False


class Score(NamedTuple):
    """The rubric's verdict: reward components (weighted by the env) and metrics (not rewards).

    ``outcome`` names how a finished episode ended, in the environment's words
    (``"win"``, ``"draw"``, ``"loss"``...; at most 64 characters), or None: the
    archive keeps it as a column that runs are filtered on.
    """

    components: dict[str, float]
    metrics: dict[str, Any]
    outcome: str | None = None


class EnvironmentUnavailable(Exception):
    """Raised by an entry point whose environments cannot be offered on this install,
    typically for want of an optional package. Its message says what is missing and
    how to get it ("needs reasoning-gym: pip install 'wander-rl[rg]'"): the service
    lists it, and names it when someone asks for one of those environments."""


class Environment(ABC, Generic[ConfigT]):
    """Base class of environments; subclasses fill the class attributes and the methods."""

    name: ClassVar[str]
    version: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[EnvKind]
    Config: ClassVar[type[EnvConfig]]
    reward_weights: ClassVar[Mapping[str, float]]
    """Component name -> weight; the total reward is the weighted sum of the components."""
    component_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    """The least and the greatest value of any reward component. The service checks a
    score from a worker against it (a value outside is a failed call, never a reward):
    a worker's reply is not trusted."""
    split_names: ClassVar[tuple[str, ...]] = ("train", "eval")
    tools: ClassVar[list[dict[str, Any]] | None] = None
    """OpenAI tool schemas offered to the model, for tool environments."""
    isolation: ClassVar[Isolation] = "process"
    """Where the service runs this environment's ``reset``, ``step`` and ``score``.

    ``"process"`` (the default, and what every plugin gets unless it says otherwise):
    in a pool of unprivileged worker processes, under a deadline and a memory budget,
    with no network and no secrets; a call past its deadline fails with ``env_timeout``
    and its worker is replaced. Anything that evaluates model text (``eval``, a parser of
    expressions, a query engine) or whose cost grows faster than its input must run so.

    ``"inline"``: on the service's event loop, with no overhead. Only for code that is
    pure and bounded: linear in the action (``max_action_bytes``) and in the state, no
    imports of untrusted text, no I/O. A slow inline call stalls every request.
    """
    pure_parsing: ClassVar[bool] = False
    """Whether the worker that ran a call of this environment may serve the next call.

    False (the default, and what every plugin gets unless it says otherwise): each call
    runs in a fresh worker, killed after it, so that a hole that let model text run as
    code there reaches no later call, of any tenant. True: the environment only reads
    actions with checks of its own, in code it ships (no third-party scorer, no
    evaluation, no parser of expressions), and its worker may serve the next call,
    sparing a fork. Meaningful for ``isolation = "process"`` only.
    """
    max_action_bytes: ClassVar[int | None] = None
    """The largest action this environment takes (the JSON of the assistant message), where
    it is below the service's ``WANDER_MAX_ACTION_BYTES``: 413 above it. None: the
    service's limit."""

    @abstractmethod
    def examples(self, config: ConfigT, split: str) -> Sequence[Any]:
        """The task dataset of ``split``; item ``i`` is the same on every machine."""

    @abstractmethod
    def reset(self, config: ConfigT, example: Any, seed: int) -> Reset:
        """Start an episode on ``example`` with the example seed ``seed``."""

    @abstractmethod
    def step(self, config: ConfigT, state: State, action: Message, rng: TurnRandom) -> Transition:
        """Apply one assistant message; draw randomness only from ``rng``."""

    @abstractmethod
    def score(self, config: ConfigT, state: State) -> Score:
        """Score the episode so far; outcome components are 0 until it is done."""

    def public_state(self, state: State) -> dict[str, Any]:
        """What clients may see of ``state``; override to hide answers."""
        return dict(state)

    def split_sizes(self, config: ConfigT) -> dict[str, int]:
        """Split name -> number of examples."""
        return {split: len(self.examples(config, split)) for split in self.split_names}

    def total(self, components: Mapping[str, float]) -> float:
        """The weighted sum of the reward components."""
        return math.fsum(self.reward_weights[name] * value for name, value in components.items())


def last_tagged(text: str | None, tag: str) -> str | None:
    """The text inside the last ``<tag>...</tag>`` of ``text``, or None: what
    ``re.findall(f"<{tag}>(.*?)</{tag}>", text, re.DOTALL)[-1]`` finds, in linear time.

    The regular expression retries from every opening tag when no closing tag follows
    one, which is quadratic in the number of tags. This scans once.
    """
    if not text:
        return None
    opening, closing = f"<{tag}>", f"</{tag}>"
    found, position = None, 0
    while (start := text.find(opening, position)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        found, position = text[start + len(opening) : end], end + len(closing)
    return found


SPACE = re.compile(r"\s*")


def is_tagged_answer(text: str | None, tag: str) -> bool:
    """Whether ``text`` is an answer inside ``<tag>...</tag>``, with nothing around it but
    whitespace and, before it, an optional ``<think>...</think>``: a full match of
    ``\\s*(<think>.*?</think>\\s*)?<tag>.*?</tag>\\s*`` (DOTALL), in linear time (the
    expression backtracks from every ``</think>``: see ``last_tagged``)."""
    body = (text or "").strip()
    opening, closing = f"<{tag}>", f"</{tag}>"
    if not body.endswith(closing):
        return False
    last = len(body) - len(closing)  # the opening tag must end before the closing one starts
    if body.startswith(opening) and len(opening) <= last:
        return True
    if not body.startswith("<think>"):
        return False
    position = len("<think>")
    while (end := body.find("</think>", position)) >= 0:
        answer = _after_space(body, end + len("</think>"))
        if answer + len(opening) > last:
            return False  # a later </think> leaves even less room
        if body.startswith(opening, answer):
            return True
        position = end + 1
    return False


def _after_space(text: str, position: int) -> int:
    """Where the whitespace that starts at ``position`` ends."""
    spaces = SPACE.match(text, position)
    return position if spaces is None else spaces.end()


def without_tagged(text: str, tag: str) -> str:
    """``text`` less every ``<tag>...</tag>``: what ``re.sub(f"<{tag}>.*?</{tag}>", "",
    text, flags=re.DOTALL)`` returns, in linear time (see ``last_tagged``)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    kept, position = [], 0
    while (start := text.find(opening, position)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        kept.append(text[position:start])
        position = end + len(closing)
    kept.append(text[position:])
    return "".join(kept)
