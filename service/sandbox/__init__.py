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
from wander.service.sandbox.calls import CALLS, Advanced, Rescored, Started
from wander.service.sandbox.pool import WorkerPool
from wander.service.settings import Settings

__all__ = ["Advanced", "Rescored", "Sandbox", "Started"]


class Sandbox:
    """Runs the engine's environment calls where each environment declared."""

    def __init__(self, settings: Settings) -> None:
        self.pool = WorkerPool(
            settings.env_workers,
            settings.env_call_seconds,
            settings.env_memory_bytes,
            settings.env_wait_seconds,
        )

    async def start(
        self, env: Environment[Any], config: EnvConfig, split: str, index: int, seed: int
    ) -> Started:
        """Reset example ``index`` of ``split`` with ``seed``, and score it."""
        started: Started = await self._call(
            "start", env, config, split=split, index=index, seed=seed
        )
        return started

    async def advance(
        self, env: Environment[Any], config: EnvConfig, state: State, action: Message, seed: int
    ) -> Advanced:
        """Apply ``action`` to ``state``, and score the result."""
        advanced: Advanced = await self._call(
            "advance", env, config, state=state, action=action, seed=seed
        )
        return advanced

    async def rescore(self, env: Environment[Any], config: EnvConfig, state: State) -> Rescored:
        """Score ``state`` again (an episode stored before scores were)."""
        rescored: Rescored = await self._call("rescore", env, config, state=state)
        return rescored

    async def _call(
        self, op: str, env: Environment[Any], config: EnvConfig, **arguments: Any
    ) -> Any:
        """``calls.CALLS[op]``, where ``env`` declared it runs: here, or in a worker."""
        if env.isolation == "inline":
            return CALLS[op](env, config, **arguments)
        request = {"op": op, "env": env.name, "config": config.model_dump(mode="json")}
        return await self.pool.call({**request, **arguments})

    async def aclose(self) -> None:
        """Stop the workers (the service is stopping)."""
        await self.pool.aclose()
