"""The catalog: which environments this service offers, what they publish, and their configs.

Everything here is about environments, not episodes: looking one up by name
(404 ``env_not_found``), the ``EnvInfo`` it publishes, and parsing the config a
client sends (422 with the field errors). The engine asks the catalog; the
``/v1/environments`` routes read it directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from wander.client.models import EnvInfo, RewardComponent, UnavailableEnvironments
from wander.service.envs import Registry
from wander.service.envs.sdk import EnvConfig, Environment
from wander.service.errors import EnvNotFound, InvalidInput

CONFIG_CACHE_SIZE = 4096
"""Distinct (environment, config) pairs kept parsed; steps parse an episode's config once."""


class Catalog:
    """The environments of a ``Registry``, with their published infos and parsed configs."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._infos = {name: env_info(env) for name, env in registry.items()}
        self._configs: dict[tuple[str, bytes], EnvConfig] = {}

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
