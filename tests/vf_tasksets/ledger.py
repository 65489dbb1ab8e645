"""Ledger: find the richest account by asking a tool, written only against Verifiers'
public API (a task-scoped ``vf.Toolset``, served per rollout as an MCP server process).

Each task's accounts and balances are drawn from a generator seeded by its index; the
tool server gets its task over Verifiers' ``/task`` channel (``setup_task``) and counts
its calls in a ``vf.State`` of its own, which it keeps in sync over the ``/state``
channel. The reward ``richest`` (weight 1) is whether the model's last reply names the
account with the largest balance; ``frugal`` (weight 0.1) is 1 for one lookup per
account or fewer, read from the tool server's state.

Run as a module, this is the tool server (``python -m ledger``), as Verifiers launches it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (interop venv)

__all__ = ["LedgerConfig", "LedgerTask", "LedgerTaskset"]

NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")


class LedgerState(vf.State):
    lookups: int = 0


class LedgerToolset(vf.Toolset[vf.ToolsetConfig, LedgerState]):
    TOOL_PREFIX = "ledger"

    async def setup_task(self, task: LedgerData) -> None:
        self.balances: dict[str, int] = task.info["balances"]

    @vf.tool
    def balance(self, account: str) -> str:
        """The balance of an account, in whole dollars."""
        self.state.lookups += 1
        if account not in self.balances:
            return f"no account named {account!r}"
        return str(self.balances[account])


class LedgerData(vf.TaskData):
    info: dict


class LedgerTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class LedgerTask(vf.Task[LedgerData, LedgerState, LedgerTaskConfig]):
    @classmethod
    def toolsets(cls, config: LedgerTaskConfig) -> list[vf.Toolset]:
        return [LedgerToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def richest(self, trace: vf.Trace) -> float:
        balances = self.data.info["balances"]
        replies = [m for m in trace.messages if m.role == "assistant" and m.content]
        said = (replies[-1].content or "").strip().lower() if replies else ""
        return float(said == max(balances, key=balances.__getitem__))

    @vf.reward(weight=0.1)
    async def frugal(self, trace: vf.Trace) -> float:
        return float(0 < trace.state.lookups <= len(self.data.info["balances"]))


class LedgerConfig(vf.TasksetConfig):
    accounts: int = 3
    """Accounts per task (at most six)."""
    task: LedgerTaskConfig = LedgerTaskConfig()


class LedgerTaskset(vf.Taskset[LedgerTask, LedgerConfig]):
    INFINITE = True

    def load(self) -> Iterator[LedgerTask]:
        for index in range(10**9):
            draw = random.Random(index)
            names = draw.sample(NAMES, min(self.config.accounts, len(NAMES)))
            balances = {name: draw.randrange(1000) for name in names}
            yield LedgerTask(
                LedgerData(
                    name=f"ledger#{index}",
                    system_prompt="Use the tool to read balances. Reply with one name alone.",
                    prompt=f"Which of these accounts holds the most: {', '.join(names)}?",
                    info={"balances": balances},
                ),
                self.config.task,
            )


if __name__ == "__main__":
    LedgerToolset.run()
