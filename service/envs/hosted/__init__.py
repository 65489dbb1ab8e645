"""Environments written for another framework, hosted as Wander environments.

Such an environment keeps its episode in a live object (an OpenEnv ``Environment``
instance), where a Wander environment keeps it in a JSON state. The adapters here make
one the other: the state holds the episode's seed and every action taken, and the live
object is rebuilt from them by replay (``replay.py``) wherever a step lands, on any
replica, after any restart. The adapters are environments like the others: they know
nothing of HTTP or storage, and run in the sandbox's workers.
"""

from __future__ import annotations

from typing import TypeVar

from wander.service.envs.sdk import EnvConfig, Environment

ConfigT = TypeVar("ConfigT", bound=EnvConfig)

HOSTED_VARIABLES = ("WANDER_OPENENV",)
"""The settings that name hosted environments, read where environments load (the service
and its fork server): each names code to import, never a secret."""


class Hosted(Environment[ConfigT]):
    """Base of the hosted environments: code of the operator's choosing that Wander does
    not ship, so the fork server never runs it itself (``worker.WarmUp``)."""
