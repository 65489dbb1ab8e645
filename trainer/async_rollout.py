"""Asynchronous rollouts: the next batches are played while the trainer trains.

In lockstep (TRL's own order) a generation batch is played, then trained on, then
the next one is played: the trainer waits for every episode of the batch, the
service's round trips and the slowest game included, and the sampler waits for
every optimizer step. ``AsyncRollout`` plays up to ``max_staleness`` batches ahead
in a thread of its own, each with the newest policy the trainer has published when
the batch starts; the trainer then trains on samples of a policy at most
``max_staleness`` optimizer steps old (``wander/staleness`` in the metrics).

The gradient of such a sample needs the importance weight against the policy that
sampled it, which TRL applies to a vLLM server's samples and ``off_policy`` adds
without one.

What the trainer will ask for is known in advance: Wander lays the run's rows out
unshuffled (``batches.training_rows``), so batch n is rows n*G to (n+1)*G, each
repeated ``num_generations`` times. A batch is played ahead only as predicted, and
checked when asked for: another one (a resumed run's first, say) is played there
and then, what was played ahead is dropped (its episodes are finished, archived,
and not trained on), and the prediction goes on from the batch asked for.

What samples:

- without vLLM, a copy of the trainer's model (its memory, twice), whose weights the
  trainer's replace before each batch it starts (``ModelCopy``);
- with a vLLM server (``use_vllm``), the server, whose weights TRL syncs before each
  rollout call, while a batch played ahead may be sampling on it: ``ServedWeights``
  makes TRL's sync wait for the request in flight and holds the next one until the
  weights are in, so that every request samples with one version; a batch whose turns
  straddle a sync counts as the older version's. Each token's sampling logprob is the
  server's, so the importance weight stays exact per token.

With several processes (``accelerate launch``), TRL asks each for its part of the
batch: a contiguous slice, the same one every batch. Each process plays its own
slices ahead, on its own copy of the model, and none waits for another's episodes
(in lockstep every process goes through as many turns as the longest episode of any:
``processes``); the processes meet only when TRL asks for a batch, where the share of
failed episodes is judged on the whole batch, as in lockstep. A model sharded by
ZeRO or FSDP has no whole copy to sample with, and a vLLM server's client lives on the
main process only: ``check`` refuses those runs when they start.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainerCallback

from wander.trainer.backends import (
    Generation,
    TransformersBackend,
    VLLMServerBackend,
)
from wander.trainer.processes import Processes
from wander.trainer.rollout import WanderRollout

Prompt = list[dict[str, Any]]


@dataclass
class Played:
    """A batch played, or being played, ahead of the trainer's asking."""

    prompts: list[Prompt]
    output: Future[dict[str, Any]] = field(default_factory=Future)
    version: int = -1
    """The optimizer step of the policy that played it (set when it starts)."""


@dataclass(frozen=True)
class Start:
    """When a batch began to be played, and by which policy: what a run's log of its
    batches keeps (not their outputs, which would pile up over a run)."""

    batch: int | None
    """Its place in the plan (None: a batch the plan does not hold)."""
    version: int
    started: float


Version = Callable[[], int]
"""The optimizer step of the weights a batch was played with, asked once it is played."""


@dataclass
class ModelCopy:
    """The trainer's newest weights, as published, and the sampler's copy of them."""

    version: int = -1
    weights: dict[str, Any] | None = None
    sampler: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, trainer: Any) -> None:
        """The trainer's weights as of its current step (a copy: the trainer goes on
        changing its own)."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        weights = {name: value.detach().clone() for name, value in model.state_dict().items()}
        with self.lock:
            if self.sampler is None:
                self.sampler = copy.deepcopy(model).eval()
            self.version, self.weights = trainer.state.global_step, weights

    def begin(self, rollout: WanderRollout) -> tuple[WanderRollout, Version]:
        """``rollout`` sampling with the newest published weights, and their version."""
        with self.lock:
            weights, version, self.weights = self.weights, self.version, None
        if weights is not None:
            self.sampler.load_state_dict(weights)
        played = copy.copy(rollout)
        played.backend = TransformersBackend(self.sampler, rollout.tokenizer, rollout.sampling)
        return played, lambda: version


@dataclass
class ServedWeights:
    """The vLLM server's weights: their version (the optimizer step TRL last synced),
    the lock that keeps a sync and a generation request apart, and the turnstile a sync
    holds from the moment it is asked for, so that no request starts meanwhile: with
    the lock alone, the request that ended released it and the rollout's next one,
    asked a moment later, could take it again before the waiting sync woke, on a busy
    machine all the batch's requests (CI saw it)."""

    version: int = -1
    client: Any = None
    following: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    turnstile: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, trainer: Any) -> None:
        """TRL synced the server before this rollout call; on the first, its syncs are
        wrapped to take the lock and record the step they synced."""
        if self.following:
            return
        self.following = True
        generation = trainer.vllm_generation
        self.client, sync = generation.vllm_client, generation.sync_weights

        def locked_sync() -> None:
            with self.turnstile, self.lock:
                sync()
                self.version = trainer.state.global_step

        generation.sync_weights = locked_sync
        self.version = trainer.state.global_step

    def begin(self, rollout: WanderRollout) -> tuple[WanderRollout, Version]:
        """``rollout`` sampling on the server, and the oldest version it sampled with."""
        backend = ServedBackend(VLLMServerBackend(self.client, rollout.sampling), self)
        played = copy.copy(rollout)
        played.backend = backend
        return played, backend.oldest


class ServedBackend:
    """A vLLM server backend whose requests wait for a sync in progress, noting the
    version of the weights each one sampled with."""

    def __init__(self, backend: VLLMServerBackend, weights: ServedWeights) -> None:
        self.backend, self.weights = backend, weights
        self.versions: list[int] = []

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        with self.weights.turnstile:  # a sync asked for goes first
            self.weights.lock.acquire()
        try:
            self.versions.append(self.weights.version)
            return self.backend.generate(prompts, max_tokens)
        finally:
            self.weights.lock.release()

    def oldest(self) -> int:
        """The oldest version a request sampled with (none yet: the current one)."""
        return min(self.versions, default=self.weights.version)


class AsyncRollout:
    """``rollout_func`` playing ``ahead`` of ``plan``'s batches ahead of the trainer."""

    def __init__(
        self,
        rollout: WanderRollout,
        plan: Sequence[list[Prompt]],
        ahead: int,
        max_staleness: int,
        *,
        served: bool = False,
    ) -> None:
        """``plan``: the prompts of each generation batch the trainer will ask for, in
        order (``batch_plan``). ``ahead``: how many batches to play ahead (``ahead``);
        a batch whose policy turns out more than ``max_staleness`` optimizer steps old
        when it is asked for is played again. ``served``: sample on the trainer's vLLM
        server (``use_vllm``), else on a copy of its model."""
        self.rollout, self.plan = rollout, list(plan)
        self.batches_ahead, self.max_staleness = ahead, max_staleness
        self.sampler: ModelCopy | ServedWeights = ServedWeights() if served else ModelCopy()
        self.ahead: deque[Played] = deque()
        self.next = 0  # the batch of the plan to play ahead next
        self.part = slice(None)  # this process's part of each batch
        self.playing: WanderRollout | None = None
        self.starts: list[Start] = []  # every batch played, in order
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="wander-rollout")

    def __call__(self, prompts: list[Prompt], trainer: Any = None) -> dict[str, Any]:
        step = trainer.state.global_step
        if self.playing is None:  # the first call
            self.playing = self._playing(trainer)
        self.sampler.publish(trainer)
        if self.ahead and self.ahead[0].prompts == prompts:
            played = self.ahead.popleft()
        else:
            self._drop_ahead()
            played = self._submit(prompts)
            found = self._locate(prompts)
            self.next = len(self.plan) if found is None else found[0] + 1
            if found is not None:
                self.part = found[1]
        while len(self.ahead) < self.batches_ahead and self.next < len(self.plan):
            self.ahead.append(self._submit(self.plan[self.next][self.part]))
            self.next += 1
        output = played.output.result()
        if step - played.version > self.max_staleness:  # the run took more steps than planned
            self._drop_ahead()
            played = self._submit(prompts)
            output = played.output.result()
        output["wander_staleness"] = [step - played.version] * len(output["episode_id"])
        self._judge(output, trainer)
        return output

    def _judge(self, output: dict[str, Any], trainer: Any) -> None:
        """The share of the batch's episodes that failed, judged on every process's
        part of it, as in lockstep (``WanderRollout.judge_failures``)."""
        failures = output.pop("wander_failure")
        processes = Processes(trainer.accelerator)
        self.rollout.judge_failures(output["episode_id"], failures, processes)

    def _playing(self, trainer: Any) -> WanderRollout:
        """The rollout the batches are played with: stopping on the trainer's model's
        stop tokens, as TRL does (``_play`` leaves the share of failed episodes to be
        judged when a batch is asked for, on every process's part of it)."""
        playing = copy.copy(self.rollout)
        playing.stop_ids = sorted(self.rollout.stops_for(trainer))
        return playing

    def _locate(self, prompts: list[Prompt]) -> tuple[int, slice] | None:
        """The batch of the plan that ``prompts`` are this process's part of, and which
        part (None: not in the plan). The parts of a batch are equal and in order."""
        size = len(prompts)
        for index, batch in enumerate(self.plan):
            for start in range(0, len(batch), size):
                if batch[start : start + size] == prompts:
                    return index, slice(start, start + size)
        return None

    def _index(self, prompts: list[Prompt]) -> int | None:
        found = self._locate(prompts)
        return None if found is None else found[0]

    def _submit(self, prompts: list[Prompt]) -> Played:
        played = Played(prompts)
        played.output = self.pool.submit(self._play, played)
        return played

    def _play(self, played: Played) -> dict[str, Any]:
        started = time.monotonic()
        assert self.playing is not None  # set by the first call, before any batch
        rollout, version = self.sampler.begin(self.playing)
        self.starts.append(Start(self._index(played.prompts), version(), started))
        try:
            return rollout.play(played.prompts, judge=False)
        finally:
            played.version = version()

    def _drop_ahead(self) -> None:
        """Wait for the batches played ahead (their episodes end), and drop them."""
        while self.ahead:
            self.ahead.popleft().output.exception()

    def close(self) -> None:
        """Ends the batches played ahead and the thread (the run is over)."""
        self._drop_ahead()
        self.pool.shutdown()


class Closing(TrainerCallback):
    """Closes the run's ``AsyncRollout`` when training ends."""

    def __init__(self, rollout: AsyncRollout) -> None:
        self.rollout = rollout

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.rollout.close()


def batch_plan(
    prompts: Sequence[Prompt], groups: int, generations: int, batches: int | None = None
) -> list[list[Prompt]]:
    """The prompts of each generation batch TRL will ask for: ``groups`` rows of the
    (unshuffled) dataset at a time, each repeated ``generations`` times; the first
    ``batches`` of them (None: all)."""
    starts = range(0, len(prompts), groups)
    plan = [[p for p in prompts[i : i + groups] for _ in range(generations)] for i in starts]
    return plan[:batches]


def batches_asked(args: Any) -> int | None:
    """How many generation batches a run with TRL ``args`` asks for (None: as many as
    its epochs hold): one per ``steps_per_generation * num_iterations`` optimizer steps."""
    if args.max_steps <= 0:
        return None
    return math.ceil(args.max_steps / (args.steps_per_generation * args.num_iterations))


def ahead(max_staleness: int, args: Any) -> int:
    """How many generation batches may be played ahead: a batch played ahead is one
    generation older than the one trained on, ``steps_per_generation *
    num_iterations`` optimizer steps."""
    steps = args.steps_per_generation * args.num_iterations
    if max_staleness < steps:
        raise ValueError(
            f"max_staleness = {max_staleness} optimizer steps is less than the {steps} "
            "between two generation batches (steps_per_generation x num_iterations): no "
            "batch could be played ahead"
        )
    return max_staleness // steps


def check(args: Any, processes: int) -> None:
    """Refuse what asynchronous rollouts do not do (see the module docstring)."""
    if processes > 1 and args.use_vllm:
        raise ValueError(
            f"max_staleness with a vLLM server plays batches ahead in one process; this run "
            f"has {processes}, and TRL's client to the server lives on the main one (leave "
            "max_staleness at 0, or use_vllm off)"
        )
    if args.deepspeed or args.fsdp:
        raise ValueError(
            "max_staleness samples with a whole copy of the model in each process; "
            "DeepSpeed and FSDP shard it (leave max_staleness at 0)"
        )
    if args.shuffle_dataset:
        raise ValueError("max_staleness predicts the batches from the unshuffled dataset")
