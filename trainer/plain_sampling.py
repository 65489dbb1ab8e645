"""Sampling in this process from exactly the policy GRPO trains: ``softmax(logits /
temperature)``, cut by ``top_k`` / ``top_p`` if asked, and nothing else.

``model.generate`` does not do that by itself. It fills every option the call leaves
unset from the checkpoint's own generation config, so a ``repetition_penalty`` of
1.05 (Qwen2.5's), a ``top_k`` of 20 or a ``no_repeat_ngram_size`` there would change
what is sampled while TRL's loss scores the tokens under the plain distribution.
Some of those options cannot even be switched off from the call (their "off" is
``None``, which means "unset", which means "the checkpoint's"). So the checkpoint's
config is set aside for the call (``_without_checkpoint_defaults``) and the call
passes a complete one of its own: what is left unset there takes transformers'
global defaults, which are neutral.

Each sampled token's logprob is taken as it is drawn (``SampledLogprobs``), instead
of keeping ``output_scores``: those are batch x steps x vocabulary floats (17 GB for
256 prompts x 256 tokens with a 65k vocabulary), where this keeps one step's
batch x vocabulary and a float per token. Computing the logprobs afterwards with a
forward pass over prompt + completion would keep no scores either, but costs a
second pass over every sequence; the processor costs one log-softmax per step,
which sampling computes anyway.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from wander.trainer.backends import Sampling


class SampledLogprobs(LogitsProcessor):
    """Records the log-probability each sampled token had under the distribution it
    was drawn from.

    Placed last among the processors, it sees the scores sampling draws from. The
    token drawn from step t's scores is the last input id at step t + 1, so it holds
    one step's log-softmax until then; ``logprobs`` takes the final step's from the
    sequences ``generate`` returns.
    """

    def __init__(self) -> None:
        self._previous: torch.Tensor | None = None
        self._sampled: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._take(input_ids[:, -1])
        self._previous = scores.log_softmax(dim=-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        if self._previous is not None:
            self._sampled.append(self._previous.gather(1, tokens[:, None]).squeeze(1))
            self._previous = None

    def logprobs(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """batch x steps: the logprob of each of ``new_tokens`` (the generated part of
        ``generate``'s sequences). On a GPU, transformers may run one step past the
        end and drop it; its record is dropped too."""
        steps = new_tokens.shape[1]
        if len(self._sampled) < steps:
            self._take(new_tokens[:, -1])
        return torch.stack(self._sampled[:steps], dim=1)


def processors(sampling: Sampling, recorder: SampledLogprobs) -> LogitsProcessorList:
    """Temperature, then top-k and top-p where asked (transformers' own warpers, in
    the order ``generate`` applies them), then the recorder."""
    chain: list[LogitsProcessor] = []
    if sampling.temperature != 1.0:
        chain.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k > 0:
        chain.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1.0:
        chain.append(TopPLogitsWarper(sampling.top_p))
    return LogitsProcessorList([*chain, recorder])


def generation_config(sampling: Sampling, stops: Sequence[int], pad: int) -> GenerationConfig:
    """The call's whole configuration. Temperature, top-k and top-p are neutral here
    because ``processors`` applies them, ahead of the recorder (transformers would
    apply its own after every processor passed in, unseen by it)."""
    return GenerationConfig(
        do_sample=True,
        num_beams=1,
        max_new_tokens=sampling.max_new_tokens,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        eos_token_id=list(stops),
        pad_token_id=pad,
    )


@contextmanager
def _without_checkpoint_defaults(model: Any) -> Iterator[None]:
    """``model`` with a blank generation config for the duration (see the module
    docstring); its own is put back after. A PEFT model generates with its base
    model's config, so that is the one set aside."""
    owner = model.get_base_model() if hasattr(model, "get_base_model") else model
    kept = owner.generation_config
    owner.generation_config = GenerationConfig()
    try:
        yield
    finally:
        owner.generation_config = kept


def sample(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    sampling: Sampling,
    stops: Sequence[int],
    pad: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(new tokens, their logprobs)``, both batch x steps, for left-padded prompts.
    Rows that stopped early are padded after their stop token."""
    recorder = SampledLogprobs()
    with torch.no_grad(), _without_checkpoint_defaults(model):
        sequences = model.generate(
            input_ids=input_ids.to(model.device),
            attention_mask=attention_mask.to(model.device),
            generation_config=generation_config(sampling, stops, pad),
            logits_processor=processors(sampling, recorder),
        )
    new = sequences[:, input_ids.shape[1] :]
    return new, recorder.logprobs(new)
