"""The environment SDK: everything an environment author imports, and nothing else.

A plugin (or a built-in environment) writes ``from wander.sdk import ...`` and
depends on this module alone; where the pieces live inside the service is not
its concern and may change. See ``docs/environments.md`` for a walk-through.
"""

from wander.service.envs.sdk import (
    EnvConfig,
    Environment,
    EnvironmentUnavailable,
    EnvKind,
    GeneratedExamples,
    Isolation,
    Message,
    Reset,
    Score,
    SizedConfig,
    State,
    Transition,
    is_tagged_answer,
    last_tagged,
    without_tagged,
)
from wander.service.envs.seeding import TurnRandom, canonical_json, example_seed, stable_hash

__all__ = [
    "EnvConfig",
    "EnvKind",
    "Environment",
    "EnvironmentUnavailable",
    "GeneratedExamples",
    "Isolation",
    "Message",
    "Reset",
    "Score",
    "SizedConfig",
    "State",
    "Transition",
    "TurnRandom",
    "canonical_json",
    "example_seed",
    "is_tagged_answer",
    "last_tagged",
    "stable_hash",
    "without_tagged",
]
