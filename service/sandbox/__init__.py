"""Where environment code runs: inline on the event loop, or in confined worker processes.

Every environment call of the engine (``start``: reset and score; ``advance``: step
and score) goes through ``Sandbox``, which runs it where the environment declared
(``Environment.isolation``): ``"inline"`` environments (tic-tac-toe: pure, linear in
the action) on the event loop at no cost, every other one in ``WorkerPool``, under a
deadline and a memory budget, in unprivileged processes with no network and no
secrets (``confine.py`` lists the layers). Nothing else in the service runs
environment code on model text: scores are computed here, once per step, and stored.
"""

from __future__ import annotations

from typing import Any

from wander.service.envs.sdk import EnvConfig, Environment, Message, State
from wander.service.sandbox.calls import Advanced, Rescored, Started, advance, rescore, start
from wander.service.sandbox.pool import EnvironmentRaised, WorkerPool
from wander.service.settings import Settings

__all__ = ["Advanced", "EnvironmentRaised", "Rescored", "Sandbox", "Started"]


class Sandbox:
    """Runs the engine's environment calls where each environment declared."""

    def __init__(self, settings: Settings) -> None:
        self.pool = WorkerPool(
            settings.env_workers, settings.env_call_seconds, settings.env_memory_bytes
        )

    async def start(
        self, env: Environment[Any], config: EnvConfig, split: str, index: int, seed: int
    ) -> Started:
        """Reset example ``index`` of ``split`` with ``seed``, and score it."""
        if env.isolation == "inline":
            return start(env, config, split, index, seed)
        started: Started = await self.pool.call(
            {"op": "start", "env": env.name, "config": config.model_dump(mode="json"),
             "split": split, "index": index, "seed": seed}
        )  # fmt: skip
        return started

    async def advance(
        self, env: Environment[Any], config: EnvConfig, state: State, action: Message, seed: int
    ) -> Advanced:
        """Apply ``action`` to ``state``, and score the result."""
        if env.isolation == "inline":
            return advance(env, config, state, action, seed)
        advanced: Advanced = await self.pool.call(
            {"op": "advance", "env": env.name, "config": config.model_dump(mode="json"),
             "state": state, "action": action, "seed": seed}
        )  # fmt: skip
        return advanced

    async def rescore(self, env: Environment[Any], config: EnvConfig, state: State) -> Rescored:
        """Score ``state`` again (an episode stored before scores were)."""
        if env.isolation == "inline":
            return rescore(env, config, state)
        rescored: Rescored = await self.pool.call(
            {"op": "rescore", "env": env.name, "config": config.model_dump(mode="json"),
             "state": state}
        )  # fmt: skip
        return rescored

    async def aclose(self) -> None:
        """Stop the workers (the service is stopping)."""
        await self.pool.aclose()
