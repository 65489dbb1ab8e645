"""Generation backends for the rollout: in-process transformers, or a vLLM server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Generation:
    """The model's sampled tokens for one prompt (ending with EOS unless cut off), and
    each token's sampling logprob where the backend knows it."""

    token_ids: list[int]
    logprobs: list[float] | None


class Backend(Protocol):
    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        """One sampled continuation per prompt (token ids in, token ids out)."""
        ...


@dataclass
class Sampling:
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0


class TransformersBackend:
    """Samples with ``model.generate`` in this process: for small models and CPUs."""

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling) -> None:
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling

    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids.to(self.model.device),
                attention_mask=mask.to(self.model.device),
                do_sample=True,
                temperature=self.sampling.temperature,
                top_p=self.sampling.top_p,
                top_k=0,  # not the model's default (often 50): the loss assumes the full softmax
                max_new_tokens=self.sampling.max_new_tokens,
                pad_token_id=pad,
                eos_token_id=self.tokenizer.eos_token_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
        if was_training:
            self.model.train()
        new = out.sequences[:, width:].tolist()
        # Scores are the processed logits the tokens were sampled from.
        steps = torch.stack(out.scores, dim=1).log_softmax(dim=-1)
        generations = []
        for row, tokens in enumerate(new):
            end = (
                tokens.index(self.tokenizer.eos_token_id) + 1
                if self.tokenizer.eos_token_id in tokens
                else len(tokens)
            )
            kept = tokens[:end]
            logprobs = steps[row, torch.arange(end), torch.tensor(kept)].tolist()
            generations.append(Generation(kept, logprobs))
        return generations


class VLLMServerBackend:
    """Samples on a vLLM server through TRL's client (``use_vllm``, server mode): TRL
    syncs the trained weights to the server before each rollout."""

    def __init__(self, client: Any, sampling: Sampling) -> None:
        self.client, self.sampling = client, sampling

    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        out = self.client.generate(
            prompts=prompts,
            n=1,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            max_tokens=self.sampling.max_new_tokens,
            logprobs=0,
        )
        return [
            Generation(ids, [top[0] for top in logprobs])
            for ids, logprobs in zip(out["completion_ids"], out["logprobs"], strict=True)
        ]
