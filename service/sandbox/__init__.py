"""Where environment code runs: inline on the event loop, or in confined worker processes.

Every environment call of the engine (``start``: reset and score; ``advance``: step
and score) goes through ``Sandbox``, which runs it where the environment declared
(``Environment.isolation``): ``"inline"`` environments (tic-tac-toe: pure, linear in
the action) on the event loop at no cost, every other one in ``WorkerPool``, under a
deadline and a memory budget, in unprivileged processes with no network and no
secrets (``confine.py`` lists the layers), whose replies are checked, not believed
(``replies.py``), each call in a worker of its own unless the environment is pure
parsing (``pool.py``), the workers shared fairly by tenants (``fairness.py``). Nothing
else in the service runs environment code on model text: scores are computed here,
once per step, and stored.

The modules: ``pool`` (the workers' slots, deadline and errors), ``fairness`` (the
slots by tenant), ``launcher`` (the service's side of the fork server, a worker as the
service holds it), ``forkserver`` (the process that forks workers), ``worker`` (what a
forked worker runs), ``confine`` (the layers), ``uids`` (a uid per live worker),
``calls`` (the calls), ``frames`` and ``replies`` (what crosses a worker's channel).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from wander.service.envs.hosted import Hosted
from wander.service.envs.sdk import EnvConfig, Environment, Message, State
from wander.service.sandbox.calls import CALLS, Advanced, Rescored, Started
from wander.service.sandbox.confine import NO_GRANTS, Grants
from wander.service.sandbox.pool import WorkerPool
from wander.service.sandbox.replies import Operation, checked
from wander.service.settings import Settings

__all__ = ["Advanced", "Rescored", "Sandbox", "Started"]


def granted(settings: Settings) -> dict[str, Grants]:
    """What the operator grants environments beyond the confinement, by name."""
    network, processes = names(settings.env_network), names(settings.env_processes)
    return {env: Grants(env in network, env in processes) for env in network | processes}


def names(value: str) -> frozenset[str]:
    """The environment names of a `name,...` setting."""
    return frozenset(filter(None, (name.strip() for name in value.split(","))))


class UngrantedProcesses(RuntimeError):
    """Hosted environments start processes that the operator has not granted them: the
    service does not start (their every episode would fail)."""

    def __init__(self, names: list[str]) -> None:
        start, them = ("starts", "it") if len(names) == 1 else ("start", "them")
        super().__init__(
            f"{', '.join(names)} {start} processes for each episode (tool servers): name "
            f"{them} in WANDER_ENV_PROCESSES to serve {them} (docs/environments.md)"
        )


class Sandbox:
    """Runs the engine's environment calls where each environment declared."""

    def __init__(self, settings: Settings, environments: Iterable[Environment[Any]] = ()) -> None:
        grants = granted(settings)
        if ungranted := sorted(
            env.name for env in environments
            if isinstance(env, Hosted) and env.starts_processes
            and not grants.get(env.name, NO_GRANTS).processes
        ):  # fmt: skip
            raise UngrantedProcesses(ungranted)
        self.pool = WorkerPool(
            settings.env_workers,
            settings.env_call_seconds,
            settings.env_memory_bytes,
            settings.env_wait_seconds,
            settings.max_episode_bytes,
            settings.env_uids,
            settings.env_live_episodes,
            grants,
        )

    async def start(
        self, env: Environment[Any], config: EnvConfig, split: str, index: int, seed: int,
        tenant: str | None = None, episode: str | None = None,
    ) -> Started:  # fmt: skip
        """Reset example ``index`` of ``split`` with ``seed``, and score it (a call of
        ``tenant``, for the workers' fair share). A hosted environment's worker is kept
        for the first step of ``episode``, the one episode created from it, if given."""
        keep = episode if isinstance(env, Hosted) else None
        started: Started = await self._call(
            "start", env, config, tenant, keep, split=split, index=index, seed=seed
        )
        return started

    async def advance(
        self, env: Environment[Any], config: EnvConfig, state: State, action: Message, seed: int,
        tenant: str | None = None, episode: str | None = None,
    ) -> Advanced:  # fmt: skip
        """Apply ``action`` to ``state`` (of ``episode``), and score the result. A hosted
        environment's worker is kept for ``episode``'s next step (``WorkerPool``)."""
        keep = episode if isinstance(env, Hosted) else None
        advanced: Advanced = await self._call(
            "advance", env, config, tenant, keep, state=state, action=action, seed=seed
        )
        return advanced

    async def rescore(
        self, env: Environment[Any], config: EnvConfig, state: State, tenant: str | None = None
    ) -> Rescored:
        """Score ``state`` again (an episode stored before scores were)."""
        rescored: Rescored = await self._call("rescore", env, config, tenant, state=state)
        return rescored

    async def _call(
        self, op: Operation, env: Environment[Any], config: EnvConfig, tenant: str | None,
        keep: str | None = None, **arguments: Any,
    ) -> Any:  # fmt: skip
        """``calls.CALLS[op]``, where ``env`` declared it runs: here, or in a worker,
        whose reply is checked before it is believed (``replies.py``), and which serves
        no other call unless ``env`` is pure parsing, or its next one if kept for the
        episode ``keep``."""
        if env.isolation == "inline":
            return CALLS[op](env, config, **arguments)
        request = {"op": op, "env": env.name, "config": config.model_dump(mode="json")}
        return await self.pool.call(
            {**request, **arguments}, partial(checked, op, env), tenant=tenant,
            reuse=env.pure_parsing is True, keep=keep,
        )  # fmt: skip

    async def aclose(self) -> None:
        """Stop the workers (the service is stopping)."""
        await self.pool.aclose()
