"""A taskset whose env reads the clock: no replay can give the answers it gave, so its
episodes fail with ``env_nondeterministic`` once Wander must rebuild one."""

from __future__ import annotations

import time
from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (interop venv)

__all__ = ["DriftingEnv", "DriftingTaskset"]


class DriftingEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()


class DriftingEnv(vf.Env[DriftingEnvConfig]):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            for _ in range(5):
                if segment.terminated:
                    break
                segment = await interaction.turn(f"It is {time.time_ns()} ns.")
        interaction.trace.record_reward("talked", 1.0, 1.0)


class DriftingTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self) -> Iterator[vf.Task]:
        for index in range(3):
            yield vf.Task(vf.TaskData(name=f"drift#{index}", prompt="Say something."))
