"""Environments and the registry that finds them.

Every environment, the built-in ones included, is registered through the
entry-point group ``wander.environments`` (name -> ``module:Class``), so a
third-party package becomes playable by being installed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import entry_points

from service.envs.sdk import Environment

ENTRY_POINT_GROUP = "wander.environments"

log = logging.getLogger(__name__)


class Registry(Mapping[str, Environment]):
    """Environment name -> instance."""

    def __init__(self, environments: Iterable[Environment]) -> None:
        self._envs = {env.name: env for env in environments}

    @classmethod
    def from_entry_points(cls) -> Registry:
        """Every environment installed; one that fails to load is logged and left out."""
        envs: list[Environment] = []
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            try:
                envs.append(entry.load()())
            except Exception:
                log.exception("environment %r (%s) failed to load", entry.name, entry.value)
        return cls(envs)

    def __getitem__(self, name: str) -> Environment:
        return self._envs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._envs))

    def __len__(self) -> int:
        return len(self._envs)
