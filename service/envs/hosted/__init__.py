"""Environments written for another framework, hosted as Wander environments.

Such an environment keeps its episode in a live object (an OpenEnv ``Environment``
instance), where a Wander environment keeps it in a JSON state. The adapters here make
one the other: the state holds the episode's seed and every action taken, and the live
object is rebuilt from them by replay (``replay.py``) wherever a step lands, on any
replica, after any restart. The adapters are environments like the others: they know
nothing of HTTP or storage, and run in the sandbox's workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from wander.service.envs.sdk import EnvConfig, Environment

ConfigT = TypeVar("ConfigT", bound=EnvConfig)

HOSTED_VARIABLES = ("WANDER_OPENENV", "WANDER_VERIFIERS", "WANDER_VERIFIERS_CONFIG")
"""The settings that name hosted environments, read where environments load (the service
and its fork server): each names code to import, or pins a taskset's fields, never a
secret."""


class Hosted(Environment[ConfigT]):
    """Base of the hosted environments: code of the operator's choosing that Wander does
    not ship, so the fork server never runs it itself (``worker.WarmUp``)."""

    starts_processes: bool = False
    """Whether its episodes start processes (a Verifiers taskset's tool servers): its
    workers must be granted them (``WANDER_ENV_PROCESSES``), or the service refuses to
    start."""


class AnyComponent(Mapping[str, float]):
    """The reward weights of an environment whose components are named as it plays (a
    Verifiers env records rewards under names of its choosing): every name weighs 1,
    and the component is the reward already weighted. Lists no name in advance."""

    def __getitem__(self, name: str) -> float:
        if not isinstance(name, str):
            raise KeyError(name)
        return 1.0

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0
