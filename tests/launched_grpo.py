"""``wander train grpo`` as each process of ``accelerate launch`` runs it
(tests/test_grpo.py launches it with 2 CPU processes), generating as
``$WANDER_TEST_BACKEND`` says:

- ``vllm``: on a stand-in for a vLLM server, TRL's server-mode generation as the
  trainer sees it: a ``vllm_generation`` whose ``vllm_client`` exists on the main
  process only, answering ``generate`` with the tokens the main process's copy of
  the policy samples and their logprobs (there is no vLLM on these machines);
- ``transformers``: in each process, the episodes of the second process failing at
  their first step (deleted just before it), so that it runs out of turns before
  the first process does.

When training ends, each process writes what it saw to
``$WANDER_TEST_RECORD/rank<N>.json``: the episodes it played, how often it called
the transformers backend, the sizes of the requests the stand-in answered (main
process) and its log history.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

import wander.trainer.grpo
from wander.cli import app
from wander.trainer.backends import Sampling, TransformersBackend

build_trainer = wander.trainer.grpo.build_trainer
generate = TransformersBackend.generate
calls: list[int] = []


def counted(
    backend: TransformersBackend, prompts: list[list[int]], max_tokens: int | None = None
) -> Any:
    calls.append(len(prompts))
    return generate(backend, prompts, max_tokens)


class StandInClient:
    """``VLLMClient.generate`` as the rollout calls it, sampled by ``model`` here."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.requests: list[int] = []

    def generate(self, prompts: list[list[int]], **sampling: Any) -> dict[str, Any]:
        self.requests.append(len(prompts))
        settings = Sampling(
            sampling["max_tokens"], sampling["temperature"], sampling["top_p"], sampling["top_k"]
        )
        generations = TransformersBackend(self.model, self.tokenizer, settings).generate(prompts)
        return {
            "completion_ids": [g.token_ids for g in generations],
            "logprobs": [[[value] for value in g.logprobs or []] for g in generations],
        }


class StandInGeneration:
    """``trainer.vllm_generation`` in server mode: the client on the main process only."""

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        if trainer.accelerator.is_main_process:
            self.vllm_client = StandInClient(trainer.model, tokenizer)

    def sync_weights(self) -> None:
        """The stand-in samples with the policy itself: nothing to push."""


class Record(TrainerCallback):
    def __init__(self, trainer: Any, played: list[str]) -> None:
        self.trainer, self.played = trainer, played

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        generation = getattr(self.trainer, "vllm_generation", None)
        client = getattr(generation, "vllm_client", None)
        record = {
            "episodes": self.played,
            "generate_calls": calls,
            "requests": None if client is None else client.requests,
            "log_history": state.log_history,
        }
        rank = self.trainer.accelerator.process_index
        folder = Path(os.environ["WANDER_TEST_RECORD"])
        (folder / f"rank{rank}.json").write_text(json.dumps(record))


def deleting_first(client: Any) -> Any:
    """``client.step_many`` deleting the episodes of its first batch of steps first."""
    step_many, rounds = client.step_many, []

    def steps(batch: list[dict[str, Any]]) -> Any:
        rounds.append(len(batch))
        if len(rounds) == 1:
            for step in batch:
                client.delete(step["episode_id"])
        return step_many(batch)

    return steps


def recording(run: Any, client: Any, model: Any, tokenizer: Any) -> Any:
    trainer = build_trainer(run, client, model, tokenizer)
    if os.environ["WANDER_TEST_BACKEND"] == "vllm":
        trainer.use_vllm, trainer._last_loaded_step = True, -1
        trainer.vllm_generation = StandInGeneration(trainer, tokenizer)
    elif trainer.accelerator.process_index == 1:
        client.step_many = deleting_first(client)
    rollout, played = trainer.rollout_func, []

    def recorded(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        output = rollout(prompts, trainer)
        played.extend(output["episode_id"])
        return output

    trainer.rollout_func = recorded
    trainer.add_callback(Record(trainer, played))
    return trainer


if __name__ == "__main__":
    wander.trainer.grpo.build_trainer = recording
    TransformersBackend.generate = counted  # type: ignore[method-assign]
    app()
