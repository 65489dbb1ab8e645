"""Countdown as a Verifiers 0.4 taskset (``verifiers.v1``'s API only), for
``python -m bench.hosted verifiers``: the env plays the user for ``TURNS`` turns, adding
each reply's number to a total; reward 1 at the end if the total is even."""

from __future__ import annotations

import re
from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)

__all__ = ["CountdownEnv", "CountdownTask", "CountdownTaskset"]

TURNS = 10


class CountdownData(vf.TaskData):
    start: int


class CountdownTask(vf.Task[CountdownData, vf.State, vf.TaskConfig]):
    pass


class CountdownEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class CountdownEnv(vf.Env[CountdownEnvConfig]):
    async def run(self, task, agents):
        total = task.data.start
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            for left in range(TURNS - 1, -1, -1):
                if segment.terminated:
                    break
                number = re.search(r"\d+", segment.last_reply)
                total += int(number.group()) if number else 0
                if left == 0:
                    break
                segment = await interaction.turn(f"Total {total}, {left} left.")
        interaction.trace.record_reward("even", float(total % 2 == 0), 1.0)


class CountdownTaskset(vf.Taskset[CountdownTask, vf.TasksetConfig]):
    INFINITE = True

    def load(self) -> Iterator[CountdownTask]:
        for index in range(10**9):
            data = CountdownData(name=f"countdown#{index}", prompt="Say a number.", start=index % 7)
            yield CountdownTask(data, self.config.task)
