"""Bank: a taskset whose tool server is taskset-scoped (``Taskset.toolsets``: one server
that ``vf-eval`` starts for a whole evaluation, Wander for each episode), written only
against Verifiers' public API. The model asks the tool the bank's name, then says it;
the reward ``named`` (weight 1) is whether its last reply is that name.

Run as a module, this is the tool server (``python -m bank``), as Verifiers launches it.
"""

from __future__ import annotations

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (interop venv)

__all__ = ["BankConfig", "BankTask", "BankTaskset"]

NAME = "Wander Savings"


class BankToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = "bank"

    @vf.tool
    def name(self) -> str:
        """The bank's name."""
        return NAME


class BankTask(vf.Task[vf.TaskData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def named(self, trace: vf.Trace) -> float:
        replies = [m for m in trace.messages if m.role == "assistant" and m.content]
        return float(bool(replies) and (replies[-1].content or "").strip() == NAME)


class BankConfig(vf.TasksetConfig):
    bank: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class BankTaskset(vf.Taskset[BankTask, BankConfig]):
    @classmethod
    def toolsets(cls, config: BankConfig) -> list[vf.Toolset]:
        return [BankToolset(config.bank)]

    def load(self) -> list[BankTask]:
        data = vf.TaskData(name="bank#0", prompt="What is the bank's name? Ask the tool.")
        return [BankTask(data, self.config.task)]


if __name__ == "__main__":
    BankToolset.run()
