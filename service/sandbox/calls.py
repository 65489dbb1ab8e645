"""The environment calls, as the engine needs them: one function per engine operation.

``start`` (reset, then score the opening state) and ``advance`` (step, then score the
new state) are each ONE call, whether they run inline or in a worker process: one
deadline covers the step and its score, and one round trip carries them. Both return
plain JSON-ready dicts, the same in either place, so the engine never knows where an
environment ran; the worker (``worker.py``) runs exactly these functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from wander.service.envs.sdk import EnvConfig, Environment, Message, State
from wander.service.envs.seeding import TurnRandom
from wander.service.records import StoredScore


class Started(TypedDict):
    """A reset episode: its state, opening messages, score and public state."""

    state: State
    messages: list[Message]
    score: StoredScore
    info: dict[str, Any]


class Advanced(TypedDict):
    """A step: the new state, the environment's reply, whether it ended, and the score."""

    state: State
    messages: list[Message]
    done: bool
    invalid: bool
    score: StoredScore
    info: dict[str, Any]


class Rescored(TypedDict):
    """The score and public state of a stored state (an episode stored without them)."""

    score: StoredScore
    info: dict[str, Any]


def start(env: Environment[Any], config: EnvConfig, split: str, index: int, seed: int) -> Started:
    """Reset example ``index`` of ``split`` and score the opening state."""
    example = env.examples(config, split)[index]
    state, messages = env.reset(config, example, seed)
    return {
        "state": state,
        "messages": messages,
        "score": score(env, config, state),
        "info": env.public_state(state),
    }


def advance(
    env: Environment[Any], config: EnvConfig, state: State, action: Message, seed: int
) -> Advanced:
    """Apply ``action`` and score the new state."""
    state, messages, done, invalid = env.step(config, state, action, TurnRandom(seed))
    return {
        "state": state,
        "messages": messages,
        "done": bool(done),
        "invalid": bool(invalid),
        "score": score(env, config, state),
        "info": env.public_state(state),
    }


def rescore(env: Environment[Any], config: EnvConfig, state: State) -> Rescored:
    """Score ``state`` again, for an episode stored before its score was."""
    return {"score": score(env, config, state), "info": env.public_state(state)}


def score(env: Environment[Any], config: EnvConfig, state: State) -> StoredScore:
    verdict = env.score(config, state)
    return {
        "total": env.total(verdict.components),
        "components": dict(verdict.components),
        "metrics": dict(verdict.metrics),
        "outcome": verdict.outcome,
    }


CALLS: dict[str, Callable[..., Any]] = {"start": start, "advance": advance, "rescore": rescore}
"""The calls by name, as a request to a worker names them (``{"op": "advance", ...}``, the
other keys the call's arguments after ``env`` and ``config``)."""
