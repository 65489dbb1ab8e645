"""Hot or cold: find a secret number, the env playing the user who answers each guess.

Seeded as Verifiers' TextArena taskset is: the env's ``run()`` seeds Python's global
``random`` from the task and draws the secret from it, and words each answer with a
draw from the same generator, so an episode replays exactly only under the same seeds.
Its words are set in ``start()``, Verifiers' hook before any rollout, so an episode
fails where the hook is not run. A task's reward ``found`` (weight 1) is recorded by
the env; ``replied`` (weight 0.2), a task reward, is the share of replies that held a
number.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (interop venv)

__all__ = ["HotColdConfig", "HotColdEnv", "HotColdTask", "HotColdTaskset"]

NUMBER = re.compile(r"-?\d+")


class HotColdConfig(vf.TasksetConfig):
    top: int = 20
    """The secret is from 1 to ``top``."""
    guesses: int = 4
    """Guesses allowed."""


class HotColdData(vf.TaskData):
    info: dict


class HotColdTask(vf.Task[HotColdData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=0.2)
    async def replied(self, trace: vf.Trace) -> float:
        replies = [m for m in trace.messages if m.role == "assistant"]
        numbered = [m for m in replies if NUMBER.search(m.content or "")]
        return len(numbered) / len(replies) if replies else 0.0


class HotColdEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class HotColdEnv(vf.Env[HotColdEnvConfig]):
    async def start(self) -> None:  # Verifiers' hook, before any rollout
        self.words = ("Warmer", "Getting close", "Not yet")

    async def run(self, task, agents):
        info = task.data.info
        random.seed(info["seed"])
        secret = random.randint(1, info["top"])
        found = 0.0
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            for attempt in range(1, info["guesses"] + 1):
                if segment.terminated:
                    break
                guess = NUMBER.search(segment.last_reply)
                if guess is not None and int(guess.group()) == secret:
                    found = 1.0
                    break
                if attempt == info["guesses"]:
                    break
                if guess is None:
                    answer = "Say a number."
                else:
                    word = random.choice(self.words)
                    direction = "higher" if int(guess.group()) < secret else "lower"
                    answer = f"{word}: go {direction}."
                segment = await interaction.turn(answer)
        interaction.trace.record_reward("found", found, 1.0)
        interaction.trace.info["secret"] = secret


class HotColdTaskset(vf.Taskset[HotColdTask, HotColdConfig]):
    INFINITE = True

    def load(self) -> Iterator[HotColdTask]:
        for index in range(10**9):
            yield HotColdTask(
                HotColdData(
                    name=f"hot-cold#{index}",
                    system_prompt="Find the secret number. Reply with one number.",
                    prompt=f"I am thinking of a number from 1 to {self.config.top}.",
                    info={"seed": index, "top": self.config.top, "guesses": self.config.guesses},
                ),
                self.config.task,
            )
