"""The rollout function GRPO trains with: multi-turn episodes played on the service.

TRL's ``GRPOTrainer`` hands ``rollout_func`` the prompts of a generation batch,
each repeated ``num_generations`` times in a row. Each prompt is a handle naming
a task (an environment with its config and split: a run may train on several)
and an example; each run of identical handles becomes one episode group on the
service (same example, same seed). All the episodes of the batch, whatever their
environments, are then played turn by turn together: generate for every live
episode, send the actions in one batch ``POST /v1/step``, repeat until all are
done.

What the trainer learns from is the model's own sampled token ids for its turns;
the environment's turns are tokenized from the chat-template delta and masked
out of the loss (``env_mask`` 0), and so are a model turn's tokens before the
run's ``train_from`` marker where it sets one (the reasoning no reward scores,
left as sampled). The service's score components come back as
extra fields, one per reward component, and so do the numeric score metrics a run
rewards (``metrics``: e.g. tic-tac-toe's count of invalid moves, where the
``invalid_move`` component marks a game once however many it holds). With several
tasks each field is named after its task (``tictactoe/win``) and is None for the
other tasks' episodes (``WanderRollout.fields``).

The trainer's sequence is the conversation as the chat template renders it, each
model turn as sampled: prompt, then per turn the model's tokens (up to and with
its stop token) and what the template puts between that turn and the next
generation prompt. Where TRL ships a training copy of the model's template (one
that renders every turn the same however the conversation goes on: Qwen3's own
drops earlier turns' reasoning), the rollout renders with that copy.

An episode whose step fails (the service answers that step with an error: the
episode was deleted or expired, the environment raised) is left out of training
rather than ending the run, as TRL treats a completion no reward function could
score: its score components are None (TRL leaves it out of its group's baseline
and gives it advantage 0) and all its tokens are masked. The batch's count is
logged; above ``max_failure_rate`` of the batch, the rollout stops the run.

In a run of several processes, each plays its own part of the batch, as TRL hands
it, in step with the others (``processes``).
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
from collections.abc import Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from wander.client import Score, StepError, WanderClient
from wander.client.models import storable
from wander.client.retry import NO_RETRY
from wander.trainer.backends import (
    Backend,
    Generation,
    Sampling,
    TransformersBackend,
    VLLMServerBackend,
    stop_token_ids,
)
from wander.trainer.processes import Processes

log = logging.getLogger(__name__)

MAX_FAILURE_RATE = 0.1
"""The share of a batch's episodes that may fail before the run stops: a few lost
episodes (expired, or hit by an environment's bug) cost a few samples; more means
something is wrong with the service or the environment."""


@dataclass(frozen=True)
class Task:
    """What a rollout plays: an environment's episodes, with their config and split,
    and the score fields it returns for them."""

    env: str
    components: Sequence[str]
    metrics: Sequence[str] = ()
    """Score metrics returned as fields too, for reward functions over them; each
    must be a number in every score."""
    config: dict[str, Any] | None = None
    split: str = "train"
    name: str = ""
    """The task's name in handles and fields (default: ``env``)."""

    @property
    def label(self) -> str:
        return self.name or self.env


Handle = tuple[str, int]
"""A task's name and an example: what a dataset prompt names."""


def example_prompt(example: int, task: str | None = None) -> list[dict[str, str]]:
    """The dataset's ``prompt`` for an example of ``task`` (of the rollout's only task
    if None): a handle the rollout resolves on the service."""
    handle: dict[str, Any] = {"wander_example": example}
    if task is not None:
        handle["wander_task"] = task
    return [{"role": "user", "content": json.dumps(handle)}]


H = TypeVar("H", bound=Hashable)


def episode_groups(
    examples: Sequence[H], size: int | None, process: int = 0, processes: int = 1
) -> list[tuple[H, int]]:
    """``(example, episodes)`` for each episode group of a batch's examples.

    TRL computes a GRPO group's advantages over ``size`` (``num_generations``)
    consecutive completions of the whole batch, which ``processes`` processes hold
    equal parts of, in order; each such window must hold one example, repeated,
    or the advantages compare episodes of different examples, silently. A window
    cut by a process boundary is the part this process holds. ``size`` None (no
    trainer): each run of identical examples is one group.
    """
    if size is None:
        return [(example, len(list(run))) for example, run in itertools.groupby(examples)]
    if len(examples) * processes % size:
        raise ValueError(
            f"a batch of {len(examples)} x {processes} prompts is not groups of "
            f"num_generations = {size}"
        )
    offset = process * len(examples)
    windows = itertools.groupby(enumerate(examples), key=lambda item: (offset + item[0]) // size)
    groups = [[example for _, example in window] for _, window in windows]
    for group in groups:
        if len(set(group)) > 1:
            raise ValueError(
                f"examples {sorted(set(group), key=repr)} share a group of num_generations = "
                f"{size}: rollout_func expects each prompt repeated num_generations times in a row"
            )
    return [(group[0], len(group)) for group in groups]


def batch_layout(trainer: Any) -> tuple[int | None, int, int]:
    """``episode_groups``' ``size, process, processes`` for the batch ``trainer`` hands
    over: its group size in training or in evaluation, and this process's place."""
    if trainer is None:
        return None, 0, 1
    size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
    return size, trainer.accelerator.process_index, trainer.accelerator.num_processes


class RolloutFailed(RuntimeError):
    """More of a batch's episodes failed than the run allows (``max_failure_rate``)."""


class ChatTemplateError(ValueError):
    """The chat template cannot be cut into the model's turns and the environment's."""


def rollout_chat_template(tokenizer: Any) -> str | None:
    """TRL's training copy of ``tokenizer``'s chat template where TRL ships one (None:
    the tokenizer's own template is fine, or TRL does not know it)."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        return get_training_chat_template(tokenizer)
    except ValueError:  # a template TRL does not know: the delta checks below guard it
        return None


def render(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    generation_prompt: bool,
    chat_template: str | None = None,
) -> str:
    return str(
        tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=generation_prompt,
            chat_template=chat_template,
        )
    )


def prompt_tokens(tokenizer: Any, text: str) -> list[int]:
    """The tokens of a rendered prompt, checked to decode back to it."""
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
    back = tokenizer.decode(ids, clean_up_tokenization_spaces=False)
    if back != text:
        raise ChatTemplateError(
            f"the tokenizer does not give back the prompt it tokenized: {text[-200:]!r} "
            f"came back as {back[-200:]!r}"
        )
    return ids


def environment_tokens(
    tokenizer: Any,
    before: str,
    after: str,
    stop_ids: Collection[int],
    model_ended: bool,
    said: str,
) -> list[int]:
    """The tokens that follow a model turn in the trainer's sequence: the rest of the
    template's end of that turn, the environment's reply, the next generation prompt.

    ``before`` is the conversation rendered up to the generation prompt the model
    answered, ``after`` with the answer (``said``, the text sent) and the environment's
    replies. The model's turn ends at the first of its stop tokens the template writes
    after ``before`` (``<|im_end|>``, Gemma's ``<end_of_turn>``, Llama 3's
    ``<|eot_id|>``) past those the model wrote as text (``A<|im_end|>B``, in ordinary
    tokens, reads back as the stop token itself); if the model stopped itself, its own
    stop token stands there, else (cut off) the template's is added, masked like the
    environment's tokens. The model's turn stays in the sequence as sampled, however
    the template would render its text.
    """
    if not after.startswith(before):
        raise ChatTemplateError(
            "the chat template renders the conversation's earlier turns differently once "
            "it grows (e.g. it drops the reasoning of earlier turns), so the prompt the "
            "model answered is not the start of the conversation that follows: give the "
            "tokenizer a template that renders each turn the same however the "
            "conversation goes on (TRL ships such training copies of the usual families' "
            f"templates, used when the model's is one of them).\nbefore: {before[-300:]!r}\n"
            f"after: {after[len(before) - 300 : len(before) + 300]!r}"
        )
    turn = after[len(before) :]
    ids: list[int] = tokenizer.encode(turn, add_special_tokens=False)
    # Counted in the text's tokens, not its characters: a stop token that is an ordinary
    # word piece ("Avai") may sit inside a longer piece the text reads back as ("TAvail").
    said_ids = tokenizer.encode(said, add_special_tokens=False)
    written = sum(token in stop_ids for token in said_ids)
    ends = (i for i, token in enumerate(ids) if token in stop_ids)
    end = next(itertools.islice(ends, written, None), None)
    if end is None:
        stops = tokenizer.convert_ids_to_tokens(list(stop_ids))
        raise ChatTemplateError(
            f"the chat template ends the assistant's turn with none of the model's stop "
            f"tokens {stops}, so the model's turn cannot be told from the environment's "
            f"(the turn as rendered: {turn[:300]!r}); the model's generation config must "
            "list the token that ends a turn among its eos_token_id"
        )
    rest = tokenizer.decode(ids[end:], clean_up_tokenization_spaces=False)
    if not turn.endswith(rest):
        raise ChatTemplateError(
            f"the tokenizer does not give back the environment's turn it tokenized: "
            f"{turn[-300:]!r} came back as {rest[-300:]!r}"
        )
    return ids[end + 1 :] if model_ended else ids[end:]


@dataclass
class Trajectory:
    """One episode's tokens as the trainer sees them."""

    task: str
    episode_id: str
    turn: int
    messages: list[dict[str, Any]]
    rendered: str  # ``messages`` as the chat template renders them, up to the generation prompt
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    live: bool = True
    failure: str | None = None  # why a step of the episode failed, if one did

    def add_model(self, generation: Generation, untrained: int = 0) -> None:
        """The model's turn; its first ``untrained`` tokens masked (``train_from``)."""
        self.completion_ids += generation.token_ids
        self.env_mask += [0] * untrained + [1] * (len(generation.token_ids) - untrained)
        self.logprobs += generation.logprobs or [0.0] * len(generation.token_ids)

    def add_environment(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

    def fail(self, failure: str) -> None:
        """Ends the episode's part in the batch: none of its tokens is trained on."""
        self.live, self.failure = False, failure
        self.env_mask = [0] * len(self.env_mask)


def untrained_tokens(tokenizer: Any, token_ids: Sequence[int], marker: str | None) -> int:
    """How many of a turn's tokens come before ``marker``'s: those whose text ends before
    the marker begins (0 where the turn holds no marker, or none is asked for). A prefix's
    text grows with it, so the count is bisected: a few decodes a turn, however long."""
    if not marker:
        return 0
    start = tokenizer.decode(token_ids, skip_special_tokens=True).find(marker)
    if start < 0:
        return 0
    return bisect.bisect_right(
        range(len(token_ids)),
        start,
        key=lambda count: len(tokenizer.decode(token_ids[: count + 1], skip_special_tokens=True)),
    )


def metric(score: Score, name: str) -> float:
    """A score metric as a reward: a number (a count, a rate, a flag), or a
    configuration error naming the metrics the score has."""
    value = score.metrics.get(name)
    if isinstance(value, int | float):
        return float(value)
    numeric = sorted(key for key, v in score.metrics.items() if isinstance(v, int | float))
    held = "absent from" if value is None else f"{type(value).__name__}, not a number, in"
    raise ValueError(
        f"metric_rewards names {name!r}, {held} the environment's scores "
        f"(numeric metrics: {', '.join(numeric) or 'none'})"
    )


TOTAL = "total"
"""The one field of the rollout of an environment that lists no score components (it
names them as it plays: a hosted Verifiers taskset): the score's total."""


def component(score: Score, name: str) -> float:
    """Score component ``name``, or the total where the environment named no components
    in advance (``TOTAL``, which is then the only one asked for)."""
    if name == TOTAL and name not in score.components:
        return score.total
    return score.components[name]


class WanderRollout:
    """``rollout_func`` for TRL's ``GRPOTrainer`` (see the module docstring)."""

    def __init__(
        self,
        client: WanderClient,
        tokenizer: Any,
        tasks: Sequence[Task],
        *,
        run: str | None = None,
        sampling: Sampling | None = None,
        max_completion_length: int = 1024,
        backend: Backend | None = None,
        stop_ids: Sequence[int] | None = None,
        max_failure_rate: float = MAX_FAILURE_RATE,
        train_from: str | None = None,
    ) -> None:
        """``tasks``: what the handles name (a handle without a task name names the
        only one). ``stop_ids``: the tokens that end a model's turn; by default the
        trainer's model's, as TRL stops on them (``stop_token_ids``).
        ``max_failure_rate``: the share of a batch's episodes that may fail (see the
        module docstring). ``train_from``: a marker in the model's turns (such as
        ``<move>``) before which its tokens are masked from the loss: the reasoning
        before the action is sampled but not trained, so that GRPO does not rewrite
        what no reward scores; a turn without the marker is trained whole."""
        self.client, self.tokenizer, self.run = client, tokenizer, run
        self.tasks = {task.label: task for task in tasks}
        if len(self.tasks) != len(tasks) or not tasks:
            raise ValueError(f"a rollout plays tasks of distinct names, not {list(tasks)}")
        self.sampling = sampling or Sampling()
        self.max_completion_length = max_completion_length
        self.backend = backend
        self.stop_ids = stop_ids
        self.max_failure_rate = max_failure_rate
        self.train_from = train_from
        self.chat_template = rollout_chat_template(tokenizer)

    @contextmanager
    def backend_for(self, trainer: Any, processes: Processes) -> Iterator[Backend]:
        """The backend the batch samples with. The transformers backend samples with
        the policy as TRL's own generation does, inside TRL's context for it: the
        model out of its DDP / DeepSpeed / FSDP wrapper, ZeRO-3's shards gathered
        (``ds3_gather_for_generation``), FSDP's full parameters summoned, gradient
        checkpointing off; entered once for the batch's turns, by every process."""
        if self.backend is not None:
            yield self.backend
        elif getattr(trainer, "use_vllm", False):
            client = getattr(trainer.vllm_generation, "vllm_client", None)  # main process only
            yield VLLMServerBackend(client, self.sampling, processes)
        elif trainer is None:
            raise ValueError("the transformers backend samples with a trainer's model")
        else:
            from trl.distributed import DistributedBackend
            from trl.models import unwrap_model_for_generation

            with (
                unwrap_model_for_generation(
                    trainer.model_wrapped,
                    trainer.accelerator,
                    gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                    gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
                ) as model,
                DistributedBackend(trainer.accelerator).summon_full_params(
                    trainer.model_wrapped, recurse=False
                ),
            ):
                yield TransformersBackend(model, self.tokenizer, self.sampling)

    @property
    def fields(self) -> dict[str, tuple[Task, str]]:
        """The score fields a batch's output holds, each with its task and the score
        component or metric it reads: named after the component (``win``), or, with
        several tasks, after the task too (``tictactoe/win``; None for the other
        tasks' episodes). Components first, then metrics, task by task."""
        named = len(self.tasks) > 1
        return {
            f"{task.label}/{what}" if named else what: (task, what)
            for task in self.tasks.values()
            for what in [*task.components, *task.metrics]
        }

    def handle(self, prompt: Sequence[dict[str, Any]]) -> Handle:
        """The task and example a dataset prompt names (``example_prompt``)."""
        named = json.loads(prompt[-1]["content"])
        if "wander_task" in named:
            task = str(named["wander_task"])
            if task not in self.tasks:
                raise ValueError(f"a prompt names task {task!r}; the rollout's: {list(self.tasks)}")
        elif len(self.tasks) == 1:
            [task] = self.tasks
        else:
            raise ValueError(f"a prompt names no task of several: {list(self.tasks)}")
        return task, int(named["wander_example"])

    def stops_for(self, trainer: Any) -> set[int]:
        if self.stop_ids is not None:
            return set(self.stop_ids)
        model = getattr(trainer, "model", None)
        return set(stop_token_ids(self.tokenizer, getattr(model, "generation_config", None)))

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any = None) -> dict[str, Any]:
        """This process's part of the batch (TRL calls every process with its own
        prompts; see ``processes``), played in step with the other processes."""
        return self.play(prompts, trainer)

    def play(
        self, prompts: list[list[dict[str, Any]]], trainer: Any = None, *, judge: bool = True
    ) -> dict[str, Any]:
        """``__call__``; ``judge=False`` leaves the share of failed episodes to the
        caller, who judges the batch when it is asked for (asynchronous rollouts:
        ``AsyncRollout``) and warns about it once: ``wander_failure`` then holds each
        episode's failure (None where it played), for the caller to take out."""
        processes = Processes(None if trainer is None else trainer.accelerator)
        stops = self.stops_for(trainer)
        handles = [self.handle(prompt) for prompt in prompts]
        trajectories: list[Trajectory] = []
        try:
            self._start(episode_groups(handles, *batch_layout(trainer)), trajectories)
            with self.backend_for(trainer, processes) as backend:
                self._play(trajectories, backend, stops, processes)
            if judge:
                self.judge_failures(
                    [t.episode_id for t in trajectories],
                    [t.failure for t in trajectories],
                    processes,
                )
            scores = [
                None if t.failure is not None else self.client.score(t.episode_id, partial=True)
                for t in trajectories
            ]
        except BaseException:
            self._abandon(trajectories)
            raise
        output: dict[str, Any] = {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.completion_ids for t in trajectories],
            "logprobs": [t.logprobs for t in trajectories],
            "env_mask": [t.env_mask for t in trajectories],
            "episode_id": [t.episode_id for t in trajectories],
            "wander_task": [t.task for t in trajectories],
            "wander_failed": [t.failure is not None for t in trajectories],
        }
        if not judge:
            output["wander_failure"] = [t.failure for t in trajectories]
        for name, (task, what) in self.fields.items():
            read = component if what in task.components else metric
            output[name] = [
                read(score, what) if score is not None and t.task == task.label else None
                for t, score in zip(trajectories, scores, strict=True)
            ]
        return output

    def _play(
        self,
        trajectories: list[Trajectory],
        backend: Backend,
        stops: Collection[int],
        processes: Processes,
    ) -> None:
        """Turn by turn until every episode of every process has ended: a process
        whose own have ended goes on generating for none (``Backend.generate``)."""
        live = [t for t in trajectories if t.live]
        while processes.any(bool(live)):
            room = [self.max_completion_length - len(t.completion_ids) for t in live]
            generations = backend.generate(
                [t.prompt_ids + t.completion_ids for t in live], max(room, default=None)
            )
            if live:  # each turn within what is left of its completion, whatever was sampled
                cut = [g.cut(left) for g, left in zip(generations, room, strict=True)]
                self._step(live, cut, stops)
            live = [t for t in live if t.live]

    def _step(
        self, live: list[Trajectory], generations: list[Generation], stops: Collection[int]
    ) -> None:
        for trajectory, generation in zip(live, generations, strict=True):
            if generation.failure:
                self._refused(trajectory, generation, stops)
        generated = [(t, g) for t, g in zip(live, generations, strict=True) if not g.failure]
        if not generated:
            return
        live, generations = [t for t, _ in generated], [g for _, g in generated]
        texts = self.tokenizer.batch_decode(
            [g.token_ids for g in generations], skip_special_tokens=True
        )
        actions = [storable(text) for text in texts]
        results = self.client.step_many(
            [
                {"episode_id": t.episode_id, "action": action, "turn": t.turn}
                for t, action in zip(live, actions, strict=True)
            ]
        )
        for trajectory, generation, action, result in zip(
            live, generations, actions, results, strict=True
        ):
            self._advance(trajectory, generation, action, result, stops)

    def _refused(
        self, trajectory: Trajectory, generation: Generation, stops: Collection[int]
    ) -> None:
        """The backend generated nothing for the episode (its server refused the request):
        it fails (counted under ``max_failure_rate``) and is aborted on the service. A
        stop token stands for the turn, masked: TRL reads the last token of every
        completion, and one failed at its first turn would have none."""
        trajectory.add_environment([min(stops)])
        trajectory.fail(f"generation refused: {generation.failure}")
        self.client.delete(trajectory.episode_id)

    def judge_failures(
        self, episodes: Sequence[str], failures: Sequence[str | None], processes: Processes
    ) -> None:
        """Judged on the whole batch, every process's part of it, so that the
        processes stop together (one alone would leave the others waiting for it):
        ``failures`` holds how each of this process's ``episodes`` failed (None where
        it played)."""
        failed = [(e, f) for e, f in zip(episodes, failures, strict=True) if f is not None]
        first = f" (the first, {failed[0][0]}: {failed[0][1]})" if failed else ""
        total, played = processes.total(len(failed)), processes.total(len(episodes))
        if not total:
            return
        what = f"{total} of {played} episodes of the batch failed{first}"
        if total > self.max_failure_rate * played:
            raise RolloutFailed(
                f"{what}: more than max_failure_rate = {self.max_failure_rate} of the batch, "
                "so the run stops; check the service and the environment (or raise "
                "max_failure_rate in the run's config)"
            )
        if failed or processes.main:
            log.warning("%s; left out of training (rewards None, tokens masked)", what)

    def _abandon(self, trajectories: list[Trajectory]) -> None:
        """A rollout that fails aborts the episodes it leaves being played, rather than
        leave them to idle out on the service: each asked once (no retries, however
        patient the run's client: the service may be what failed)."""
        patient, self.client.retry = self.client.retry, NO_RETRY
        try:
            for trajectory in trajectories:
                if trajectory.live:
                    try:
                        self.client.delete(trajectory.episode_id)
                    except Exception as exc:  # the failure being raised says more
                        log.warning("episode %s was left open: %s", trajectory.episode_id, exc)
        finally:
            self.client.retry = patient

    def _start(self, groups: list[tuple[Handle, int]], trajectories: list[Trajectory]) -> None:
        """One episode group per GRPO group (``episode_groups``), added to
        ``trajectories`` as each is created."""
        for (name, example), n in groups:
            task = self.tasks[name]
            group = self.client.create(
                task.env,
                config=task.config,
                split=task.split,
                example=example,
                n=n,
                run=self.run,
            )
            for episode in group:
                messages = [m.model_dump(mode="json") for m in episode.messages]
                rendered = render(self.tokenizer, messages, True, self.chat_template)
                prompt = prompt_tokens(self.tokenizer, rendered)
                trajectories.append(
                    Trajectory(name, episode.id, episode.turn, messages, rendered, prompt)
                )

    def _advance(
        self,
        trajectory: Trajectory,
        generation: Generation,
        action: str,
        result: Any,
        stops: Collection[int],
    ) -> None:
        # The turn's tokens stay, masked, if its step fails: TRL reads the last token of
        # every completion, and an episode failed at its first step would have none.
        trajectory.add_model(
            generation, untrained_tokens(self.tokenizer, generation.token_ids, self.train_from)
        )
        if isinstance(result, StepError):
            trajectory.fail(f"{result.error.code}: {result.error.message}")
            return
        trajectory.turn = result.turn
        if result.done:
            trajectory.live = False
            return
        replies = [m.model_dump(mode="json") for m in result.observation]
        messages = [*trajectory.messages, {"role": "assistant", "content": action}, *replies]
        rendered = render(self.tokenizer, messages, True, self.chat_template)
        ended = bool(generation.token_ids) and generation.token_ids[-1] in stops
        following = environment_tokens(
            self.tokenizer, trajectory.rendered, rendered, stops, ended, action
        )
        room = self.max_completion_length - len(trajectory.completion_ids)
        trajectory.add_environment(following[:room])
        trajectory.messages, trajectory.rendered = messages, rendered
        if len(trajectory.completion_ids) >= self.max_completion_length:
            trajectory.live = False  # out of room: scored as it stands, then dropped
            self.client.delete(trajectory.episode_id)
