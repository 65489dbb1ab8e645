"""Tally as a Verifiers 0.4 tool taskset (``verifiers.v1``'s API only), for ``python -m
bench.hosted verifiers-tools``: each task's tool server (an MCP server, a process per
episode) has one tool, ``tally_add``; the model calls it ``TURNS - 1`` times, then
replies. Reward 1 for a last reply with text.

Run as a module, this is the tool server (``python -m tally``), as Verifiers launches it.
"""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)

__all__ = ["TallyTask", "TallyTaskset"]


class TallyToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "tally"

    @vf.tool
    def add(self, number: int) -> str:
        """Add a number to the tally: its double (a stand-in for any cheap tool)."""
        return str(2 * number)


class TallyTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class TallyTask(vf.Task[vf.TaskData, vf.State, TallyTaskConfig]):
    @classmethod
    def toolsets(cls, config: TallyTaskConfig) -> list[vf.Toolset]:
        return [TallyToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def answered(self, trace: vf.Trace) -> float:
        replies = [m for m in trace.messages if m.role == "assistant"]
        return float(bool(replies and replies[-1].content))


class TallyConfig(vf.TasksetConfig):
    task: TallyTaskConfig = TallyTaskConfig()


class TallyTaskset(vf.Taskset[TallyTask, TallyConfig]):
    INFINITE = True

    def load(self) -> Iterator[TallyTask]:
        for index in range(10**9):
            data = vf.TaskData(name=f"tally#{index}", prompt="Add 3 nine times, then say done.")
            yield TallyTask(data, self.config.task)


if __name__ == "__main__":
    TallyToolset.run()
