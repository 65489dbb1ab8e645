"""The rollout function GRPO trains with: multi-turn episodes played on the service.

TRL's ``GRPOTrainer`` hands ``rollout_func`` the prompts of a generation batch,
each repeated ``num_generations`` times in a row. Each prompt is a handle naming
an example; each run of identical handles becomes one episode group on the
service (same example, same seed). All the episodes of the batch are then played
turn by turn together: generate for every live episode, send the actions in one
batch ``POST /v1/step``, repeat until all are done.

What the trainer learns from is the model's own sampled token ids for its turns;
the environment's turns are tokenized from the chat-template delta and masked
out of the loss (``env_mask`` 0). The service's score components come back as
extra fields, one per reward component.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wander.client import StepError, WanderClient
from wander.trainer.backends import (
    Backend,
    Generation,
    Sampling,
    TransformersBackend,
    VLLMServerBackend,
)
from wander.trainer.text import storable


def example_prompt(example: int) -> list[dict[str, str]]:
    """The dataset's ``prompt`` for an example: a handle the rollout resolves on the service."""
    return [{"role": "user", "content": json.dumps({"wander_example": example})}]


def _example(prompt: Sequence[dict[str, Any]]) -> int:
    return int(json.loads(prompt[-1]["content"])["wander_example"])


def episode_groups(
    examples: Sequence[int], size: int | None, process: int = 0, processes: int = 1
) -> list[tuple[int, int]]:
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
                f"examples {sorted(set(group))} share a group of num_generations = {size}: "
                "rollout_func expects each prompt repeated num_generations times in a row"
            )
    return [(group[0], len(group)) for group in groups]


def batch_layout(trainer: Any) -> tuple[int | None, int, int]:
    """``episode_groups``' ``size, process, processes`` for the batch ``trainer`` hands
    over: its group size in training or in evaluation, and this process's place."""
    if trainer is None:
        return None, 0, 1
    size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
    return size, trainer.accelerator.process_index, trainer.accelerator.num_processes


def render(tokenizer: Any, messages: Sequence[dict[str, Any]], generation_prompt: bool) -> str:
    return str(
        tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=generation_prompt
        )
    )


def environment_tokens(
    tokenizer: Any,
    through_assistant: Sequence[dict[str, Any]],
    with_replies: Sequence[dict[str, Any]],
    model_ended_turn: bool,
) -> list[int]:
    """The tokens the chat template places between the model's end-of-turn token and
    the next generation prompt: the environment's reply, templated."""
    before = render(tokenizer, through_assistant, False)
    after = render(tokenizer, with_replies, True)
    if not after.startswith(before):
        raise ValueError("the chat template renders a conversation differently once it grows")
    eos = tokenizer.eos_token
    cut = before.rfind(eos) + len(eos)
    ids: list[int] = tokenizer.encode(after[cut:], add_special_tokens=False)
    return ids if model_ended_turn else [tokenizer.eos_token_id, *ids]


@dataclass
class Trajectory:
    """One episode's tokens as the trainer sees them."""

    episode_id: str
    turn: int
    messages: list[dict[str, Any]]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    live: bool = True

    def add_model(self, generation: Generation) -> None:
        self.completion_ids += generation.token_ids
        self.env_mask += [1] * len(generation.token_ids)
        self.logprobs += generation.logprobs or [0.0] * len(generation.token_ids)

    def add_environment(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)


class WanderRollout:
    """``rollout_func`` for TRL's ``GRPOTrainer`` (see the module docstring)."""

    def __init__(
        self,
        client: WanderClient,
        env: str,
        tokenizer: Any,
        components: Sequence[str],
        *,
        config: dict[str, Any] | None = None,
        split: str = "train",
        run: str | None = None,
        sampling: Sampling | None = None,
        max_completion_length: int = 1024,
        backend: Backend | None = None,
    ) -> None:
        self.client, self.env, self.tokenizer = client, env, tokenizer
        self.components = list(components)
        self.config, self.split, self.run = config, split, run
        self.sampling = sampling or Sampling()
        self.max_completion_length = max_completion_length
        self.backend = backend

    def backend_for(self, trainer: Any) -> Backend:
        if self.backend is not None:
            return self.backend
        if getattr(trainer, "use_vllm", False):
            return VLLMServerBackend(trainer.vllm_generation.vllm_client, self.sampling)
        return TransformersBackend(trainer.model, self.tokenizer, self.sampling)

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any = None) -> dict[str, Any]:
        backend = self.backend_for(trainer)
        examples = [_example(prompt) for prompt in prompts]
        trajectories = self._start(episode_groups(examples, *batch_layout(trainer)))
        while live := [t for t in trajectories if t.live]:
            generations = backend.generate([t.prompt_ids + t.completion_ids for t in live])
            texts = self.tokenizer.batch_decode(
                [g.token_ids for g in generations], skip_special_tokens=True
            )
            results = self.client.step_many(
                [
                    {"episode_id": t.episode_id, "action": storable(text), "turn": t.turn}
                    for t, text in zip(live, texts, strict=True)
                ]
            )
            for trajectory, generation, text, result in zip(
                live, generations, texts, results, strict=True
            ):
                self._advance(trajectory, generation, text, result)
        scores = [self.client.score(t.episode_id, partial=True) for t in trajectories]
        output: dict[str, Any] = {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.completion_ids for t in trajectories],
            "logprobs": [t.logprobs for t in trajectories],
            "env_mask": [t.env_mask for t in trajectories],
            "episode_id": [t.episode_id for t in trajectories],
        }
        for name in self.components:
            output[name] = [score.components[name] for score in scores]
        return output

    def _start(self, groups: list[tuple[int, int]]) -> list[Trajectory]:
        """One episode group per GRPO group (``episode_groups``)."""
        trajectories: list[Trajectory] = []
        for example, n in groups:
            group = self.client.create(
                self.env,
                config=self.config,
                split=self.split,
                example=example,
                n=n,
                run=self.run,
            )
            for episode in group:
                messages = [m.model_dump(mode="json") for m in episode.messages]
                prompt = self.tokenizer.encode(
                    render(self.tokenizer, messages, True), add_special_tokens=False
                )
                trajectories.append(Trajectory(episode.id, episode.turn, messages, prompt))
        return trajectories

    def _advance(
        self, trajectory: Trajectory, generation: Generation, text: str, result: Any
    ) -> None:
        if isinstance(result, StepError):
            raise RuntimeError(f"step of {trajectory.episode_id} failed: {result.error.message}")
        trajectory.add_model(generation)
        trajectory.turn = result.turn
        if result.done:
            trajectory.live = False
            return
        through = [*trajectory.messages, {"role": "assistant", "content": text}]
        replies = [m.model_dump(mode="json") for m in result.observation]
        ended = bool(generation.token_ids) and (
            generation.token_ids[-1] == self.tokenizer.eos_token_id
        )
        trajectory.add_environment(
            environment_tokens(self.tokenizer, through, [*through, *replies], ended)
        )
        trajectory.messages = [*through, *replies]
        if len(trajectory.completion_ids) >= self.max_completion_length:
            trajectory.live = False  # out of room: scored as it stands, then dropped
            self.client.delete(trajectory.episode_id)
