"""The catalog: which environments this service offers, what they publish, and their configs.

Everything here is about environments, not episodes: looking one up by name
(404 ``env_not_found``), the ``EnvInfo`` it publishes, and parsing the config a
client sends (422 with the field errors). The engine asks the catalog; the
``/v1/environments`` routes read it directly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from wander.client.models import EnvInfo, RewardComponent, UnavailableEnvironments
from wander.service.envs import ENTRY_POINT_GROUP, Registry
from wander.service.envs.hosted import HOSTED_VARIABLES
from wander.service.envs.sdk import EnvConfig, Environment
from wander.service.errors import EnvNotFound, InvalidInput

CONFIG_CACHE_SIZE = 4096
"""Distinct (environment, config) pairs kept parsed; steps parse an episode's config once."""


class Catalog:
    """The environments of a ``Registry``, with their published infos and parsed configs."""

    def __init__(self, registry: Registry, infos: Mapping[str, EnvInfo] | None = None) -> None:
        self.registry = registry
        self._infos = (
            dict(infos)
            if infos is not None
            else {name: env_info(env) for name, env in registry.items()}
        )
        self._configs: dict[tuple[str, bytes], EnvConfig] = {}

    @classmethod
    def installed(cls) -> Catalog:
        """Every environment installed (``Registry.from_entry_points``), loaded once per
        process for each source (``_Source``: the entry points, and the imports that are
        blocked). Loading them and publishing their infos is most of building an app (a
        pydantic model per reasoning-gym dataset, then its JSON schema), and a process
        that builds many apps (the tests) pays it once. The environments are stateless,
        so apps may share them; each catalog keeps a config cache of its own."""
        source = _source()
        loaded = _INSTALLED.get(source)
        if loaded is None:
            catalog = cls(Registry.from_entry_points())
            if len(_INSTALLED) >= INSTALLED_KEPT:
                _INSTALLED.clear()
            _INSTALLED[source] = _Installed(catalog.registry, catalog._infos)
            return catalog
        return cls(loaded.registry, loaded.infos)

    def environments(self) -> list[EnvInfo]:
        return list(self._infos.values())

    def unavailable(self) -> list[UnavailableEnvironments]:
        """Installed environments this service cannot offer, and why."""
        return [
            UnavailableEnvironments(name=name if name in self._infos else f"{name}/*", reason=why)
            for name, why in self.registry.unavailable.items()
        ]

    def environment(self, name: str) -> EnvInfo:
        info = self._infos.get(name)
        if info is None:
            raise self._not_found(name)
        return info

    def env(self, name: str) -> Environment[Any]:
        """The environment called ``name``, or 404 ``env_not_found``."""
        try:
            return self.registry[name]
        except KeyError:
            raise self._not_found(name) from None

    def _not_found(self, name: str) -> EnvNotFound:
        why = self.registry.why_absent(name)
        if why is None:
            return EnvNotFound(f"no environment named {name!r}")
        return EnvNotFound(f"environment {name!r} is not offered here: it {why}")

    def config(self, env: Environment[Any], config: dict[str, Any]) -> EnvConfig:
        """A stored episode's config, parsed once per distinct config rather than at every step."""
        key = (env.name, orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        parsed = self._configs.get(key)
        if parsed is None:
            if len(self._configs) >= CONFIG_CACHE_SIZE:
                self._configs.clear()
            parsed = self._configs[key] = parse_config(env, config, ("config",))
        return parsed


class _Installed(NamedTuple):
    registry: Registry
    infos: dict[str, EnvInfo]


class _Source(NamedTuple):
    """What the installed environments are loaded from."""

    entry_points: tuple[tuple[str, str, str], ...]
    """Each entry point, and the distribution (and version) that declares it."""
    blocked: frozenset[str]
    """Modules set to None in ``sys.modules``, whose import fails: an environment that
    imports one is unavailable (how a package is made missing without uninstalling it)."""
    hosted: tuple[str | None, ...]
    """The settings naming hosted environments (``envs.hosted.HOSTED_VARIABLES``)."""


_INSTALLED: dict[_Source, _Installed] = {}
"""``Catalog.installed``'s registry and infos, by what they were loaded from."""
INSTALLED_KEPT = 4
"""Sources whose environments a process keeps loaded; one more starts them afresh."""


def _source() -> _Source:
    entries = (
        (entry.name, entry.value, f"{entry.dist.name}=={entry.dist.version}" if entry.dist else "")
        for entry in entry_points(group=ENTRY_POINT_GROUP)
    )
    blocked = frozenset(name for name, module in sys.modules.copy().items() if module is None)
    hosted = tuple(os.environ.get(name) for name in HOSTED_VARIABLES)
    return _Source(tuple(sorted(entries)), blocked, hosted)


def env_info(env: Environment[Any]) -> EnvInfo:
    """What ``GET /v1/environments/{name}`` publishes about ``env``."""
    default = env.Config()
    return EnvInfo(
        name=env.name,
        version=env.version,
        description=env.description,
        kind=env.kind,
        config_schema=env.Config.model_json_schema(),
        default_config=default.model_dump(mode="json"),
        splits=env.split_sizes(default),
        reward_components=[
            RewardComponent(name=name, weight=weight) for name, weight in env.reward_weights.items()
        ],
        tools=env.tools,
        isolation=env.isolation,
    )


def parse_config(
    env: Environment[Any], config: Mapping[str, Any] | None, loc: tuple[str, ...]
) -> EnvConfig:
    """``config`` validated by ``env``'s model; 422 with each field error located at ``loc``."""
    try:
        return env.Config.model_validate(config or {})
    except ValidationError as exc:
        details = [
            {"loc": [*loc, *error["loc"]], "msg": error["msg"], "type": error["type"]}
            for error in exc.errors()
        ]
        raise InvalidInput(f"invalid config for {env.name!r}", details) from None
