"""A run launched as several processes (``accelerate launch --num_processes``, one
per GPU, on one machine or several): what the rollout needs to play each process's
part of a batch in step with the others.

TRL 1.16 calls ``rollout_func`` on every process with that process's part of the
generation batch and expects that part's completions back; it then gathers the
rewards of all processes to compute each group's advantages. So each process plays
its own episodes, but some of its work is collective, and a collective that one
process makes and another does not hangs them both: generating on a vLLM server
(TRL's client lives on the main process alone, which sends every process's prompts
and hands each its answers), and every forward pass of a model sharded by ZeRO-3 or
FSDP. Each process therefore goes through the same turns as the others, until the
last episode of any process ends. With one process every collective is the identity.

The other way, the main process playing the whole batch and sending each process
its part, would fit the contract less well for no gain: the other processes would
wait while one sampled (with the transformers backend) and stepped every episode.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

T = TypeVar("T")


class Processes:
    """This process's place among the run's, and the collectives the rollout makes.
    Every process must make each call, in the same order."""

    def __init__(self, accelerator: Any = None) -> None:
        """``accelerator``: the trainer's; None: a single process."""
        self.index = 0 if accelerator is None else int(accelerator.process_index)
        self.count = 1 if accelerator is None else int(accelerator.num_processes)

    @property
    def main(self) -> bool:
        return self.index == 0

    def gather(self, value: T) -> list[T]:
        """Every process's ``value``, in process order."""
        if self.count == 1:
            return [value]
        from accelerate.utils import gather_object

        return list(gather_object([value]))

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process."""
        return any(self.gather(flag))

    def total(self, count: int) -> int:
        """The sum of every process's ``count``."""
        return sum(self.gather(count))

    def from_main(self, value: T | None) -> T:
        """The main process's ``value``, on every process (the others pass None)."""
        if self.count == 1:
            return cast(T, value)
        from accelerate.utils import broadcast_object_list

        box = [value]
        broadcast_object_list(box, from_process=0)
        return cast(T, box[0])
