"""Environments and the registry that finds them.

Every environment, the built-in ones included, is registered through the
entry-point group ``wander.environments``, so a third-party package becomes
playable by being installed. An entry point names an ``Environment`` subclass,
or a function returning a list of environments (an adapter such as ``rg/*``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import entry_points

from wander.service.envs.sdk import Environment

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
                loaded = entry.load()()
            except Exception:
                log.exception("environment %r (%s) failed to load", entry.name, entry.value)
                continue
            envs.extend(loaded if isinstance(loaded, list) else [loaded])
        return cls(envs)

    def __getitem__(self, name: str) -> Environment:
        return self._envs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._envs))

    def __len__(self) -> int:
        return len(self._envs)
