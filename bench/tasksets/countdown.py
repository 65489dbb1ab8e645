"""Countdown as a Verifiers 0.4 taskset (``verifiers.v1``'s API only), for
``python -m bench.hosted verifiers``: the env plays the user for ``TURNS`` turns, adding
each reply's number to a total; reward 1 at the end if the total is even."""

from __future__ import annotations

import re
from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)

__all__ = ["CountdownEnv", "CountdownTaskset"]

TURNS = 10


class CountdownEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class CountdownEnv(vf.Env[CountdownEnvConfig]):
    async def run(self, task, agents):
        total = task.data.info["start"]
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


class CountdownTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    INFINITE = True

    def load(self) -> Iterator[vf.Task]:
        for index in range(10**9):
            data = vf.TaskData(name=f"countdown#{index}", prompt="Say a number.",
                               info={"start": index % 7})  # fmt: skip
            yield vf.Task(data)
