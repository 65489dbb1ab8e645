"""Generation backends for the rollout: in-process transformers, or a vLLM server."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Protocol

from wander.trainer.processes import Processes


@dataclass(frozen=True)
class Generation:
    """The model's sampled tokens for one prompt (ending with a stop token unless cut
    off), and each token's sampling logprob where the backend knows it."""

    token_ids: list[int]
    logprobs: list[float] | None
    failure: str | None = None
    """Why nothing was generated for the prompt (the server refused its request): the
    episode fails, not the run."""

    def cut(self, length: int) -> Generation:
        """The first ``length`` tokens: a turn kept within what is left of a completion."""
        if len(self.token_ids) <= length:
            return self
        logprobs = None if self.logprobs is None else self.logprobs[:length]
        return Generation(self.token_ids[:length], logprobs, self.failure)


class Backend(Protocol):
    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        """One sampled continuation per prompt (token ids in, token ids out), of at most
        ``max_tokens`` tokens where that is fewer than the sampling's. In a run of
        several processes every process calls it at every turn, with no prompts once
        its own episodes have ended (see ``processes``)."""
        ...


@dataclass
class Sampling:
    """How each turn is sampled: these settings and nothing else (no repetition
    penalty, no min-p, none of a checkpoint's own generation defaults), since TRL's
    loss scores the tokens under plain ``softmax(logits / temperature)``."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: the whole vocabulary


def capped(sampling: Sampling, max_tokens: int | None) -> Sampling:
    """``sampling`` with at most ``max_tokens`` new tokens (None: as it is)."""
    if max_tokens is None or max_tokens >= sampling.max_new_tokens:
        return sampling
    return dataclasses.replace(sampling, max_new_tokens=max(1, max_tokens))


def stop_token_ids(tokenizer: Any, generation_config: Any = None) -> list[int]:
    """The tokens that end a turn, as TRL's GRPOTrainer stops on them: the tokenizer's
    EOS and every EOS id of the model's generation config. They differ where a turn's
    end is not the tokenizer's EOS (Gemma 3 ends a turn with ``<end_of_turn>``, its
    EOS is ``<eos>``; Llama 3 with ``<|eot_id|>``)."""
    declared = getattr(generation_config, "eos_token_id", None)
    ids = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


class TransformersBackend:
    """Samples with ``model.generate`` in this process: for small models and CPUs.

    A process with no prompts left still samples, from a one-token prompt, and drops
    the result: under ZeRO-3 or FSDP each forward pass is a collective of every
    process (``generate`` keeps them in step within a call: ``synced_gpus``), so
    each must call ``generate`` as often as the others.
    """

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling) -> None:
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        pad = self.tokenizer.pad_token_id
        sampling = capped(self.sampling, max_tokens)
        if not prompts:
            self._sample([[pad]], sampling)
            return []
        return self._sample(prompts, sampling)

    def _sample(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        import torch

        from wander.trainer.plain_sampling import sample

        pad = self.tokenizer.pad_token_id
        stops = stop_token_ids(self.tokenizer, self.model.generation_config)
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        was_training = self.model.training
        self.model.eval()
        try:
            tokens, logprobs = sample(self.model, ids, mask, sampling, stops, pad)
        finally:
            if was_training:
                self.model.train()
        generations = []
        for row, values in zip(tokens.tolist(), logprobs.tolist(), strict=True):
            end = next((i + 1 for i, token in enumerate(row) if token in stops), len(row))
            generations.append(Generation(row[:end], values[:end]))
        return generations


class VLLMServerBackend:
    """Samples on a vLLM server through TRL's client (``use_vllm``, server mode): TRL
    syncs the trained weights to the server before each rollout.

    TRL keeps its client on the main process only (the others have no
    ``vllm_client``: theirs is None here). As TRL's own server-mode generation
    does, the main process sends every process's prompts in one request and hands
    each process its answers.
    """

    def __init__(self, client: Any, sampling: Sampling, processes: Processes | None = None) -> None:
        self.client, self.sampling = client, sampling
        self.processes = processes or Processes()

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        everyone = self.processes.gather(prompts)
        caps = [cap for cap in self.processes.gather(max_tokens) if cap is not None]
        answers = None
        if self.processes.main:
            sampling = capped(self.sampling, max(caps) if caps else None)
            flat = self._generate([prompt for part in everyone for prompt in part], sampling)
            ends = itertools.accumulate(len(part) for part in everyone)
            answers = [flat[end - len(own) : end] for own, end in zip(everyone, ends, strict=True)]
        return self.processes.from_main(answers)[self.processes.index]

    def _generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        """One request for every prompt; if the server refuses it (a prompt past its
        ``--max-model-len``, say), one request each, so that only the prompts it
        refuses fail."""
        try:
            return self._request(prompts, sampling)
        except Exception:  # TRL's client raises a bare Exception for an HTTP error
            if len(prompts) == 1:
                return self._each(prompts, sampling)
            return [g for prompt in prompts for g in self._each([prompt], sampling)]

    def _each(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        try:
            return self._request(prompts, sampling)
        except Exception as exc:
            return [Generation([], None, " ".join(str(exc).split())[:500])]

    def _request(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        out = self.client.generate(
            prompts=prompts,
            n=1,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            max_tokens=sampling.max_new_tokens,
            logprobs=0,
        )
        return [
            Generation(ids, [top[0] for top in logprobs])
            for ids, logprobs in zip(out["completion_ids"], out["logprobs"], strict=True)
        ]
