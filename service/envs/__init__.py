"""Environments and the registry that finds them.

Every environment, the built-in ones included, is registered through the
entry-point group ``wander.environments``, so a third-party package becomes
playable by being installed. An entry point names an ``Environment`` subclass,
or a function returning a list of environments (an adapter such as ``rg/*``,
whose entry point ``rg`` is the prefix of their names). One that cannot load
here (``EnvironmentUnavailable``, or a package it imports is missing) is kept
as a reason, so that the service can say why those environments are absent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import entry_points

from wander.service.envs.sdk import Environment, EnvironmentUnavailable

ENTRY_POINT_GROUP = "wander.environments"

log = logging.getLogger(__name__)


class Registry(Mapping[str, Environment]):
    """Environment name -> instance."""

    def __init__(
        self, environments: Iterable[Environment], unavailable: Mapping[str, str] | None = None
    ) -> None:
        self._envs = {env.name: env for env in environments}
        self.unavailable = dict(unavailable or {})
        """Entry point name (an environment's name, or a family's prefix) -> why it is absent."""

    @classmethod
    def from_entry_points(cls) -> Registry:
        """Every environment installed; one that fails to load is logged and left out."""
        envs: list[Environment] = []
        unavailable: dict[str, str] = {}
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = entry.load()()
            except (EnvironmentUnavailable, ImportError) as exc:
                why = _why(exc)
                log.warning("environments %r are not offered: it %s", entry.name, why)
                unavailable[entry.name] = why
                continue
            except Exception:
                log.exception("environment %r (%s) failed to load", entry.name, entry.value)
                continue
            envs.extend(loaded if isinstance(loaded, list) else [loaded])
        return cls(envs, unavailable)

    def why_absent(self, name: str) -> str | None:
        """Why the environment ``name`` is not offered, if its entry point said."""
        for prefix, reason in self.unavailable.items():
            if name == prefix or name.startswith(f"{prefix}/"):
                return reason
        return None

    def __getitem__(self, name: str) -> Environment:
        return self._envs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._envs))

    def __len__(self) -> int:
        return len(self._envs)


def _why(exc: Exception) -> str:
    """Why an entry point's environments are absent, as "it ..." reads it."""
    if isinstance(exc, EnvironmentUnavailable):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return f"needs the module {exc.name!r}, which cannot be imported here"
    return f"cannot be imported here: {exc}"
