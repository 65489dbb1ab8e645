"""TRL's ``GRPOTrainer`` for samples of an older policy (asynchronous rollouts).

A batch played ahead was sampled by a policy some optimizer steps older than the one
the trainer has when the batch's training starts. The loss then follows the
decoupled objective TRL applies to vLLM's samples (whose sampler differs from the
trainer by its kernels): the clipped ratio compares the policy being trained with
the *proximal* one, the trainer's at the start of the batch (TRL's "old" logprobs),
and each token's loss is weighed by the importance weight of the proximal policy
against the one that sampled it, ``exp(proximal - sampled)``, masked or truncated by
TRL's own ``vllm_importance_sampling_*`` settings (default: a sequence whose weight
exceeds 3 is left out). So the clip bounds how far one batch's updates move the
policy, as in lockstep, however old the sample; the weight corrects for its age.

On a vLLM server TRL computes that weight itself (``vllm_importance_sampling_correction``)
and the stock trainer is used. Without vLLM TRL does not, and
``OffPolicyGRPOTrainer`` adds it: it folds the weight into each token's advantage,
which every TRL loss multiplies the token's term by (the weight is positive and
detached, so scaling the advantage is scaling the loss; TRL's loss takes per-token
advantages, shape (B, T), for such subclasses).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from trl import GRPOTrainer


def importance_weights(
    proximal: torch.Tensor,
    sampled: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    low: float | None,
    high: float | None,
) -> torch.Tensor:
    """Each completion token's weight, ``exp(proximal - sampled)``, as TRL's
    ``vllm_importance_sampling_mode`` reads it: per token (B, T) or per sequence
    (B, 1, the product over the sequence's unmasked tokens); ``*_truncate`` clamps it
    to [low, high], ``*_mask`` sets it to 0 outside. A token without a sampling
    logprob (NaN) weighs 1."""
    difference = torch.nan_to_num((proximal - sampled) * mask, nan=0.0)
    if mode.startswith("sequence"):
        difference = difference.sum(dim=-1, keepdim=True)
    weights = difference.exp()
    if mode.endswith("truncate"):
        return weights.clamp(min=low, max=high)
    if not mode.endswith("mask"):
        raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")
    low, high = -math.inf if low is None else low, math.inf if high is None else high
    return weights.masked_fill((weights < low) | (weights > high), 0.0)


class OffPolicyGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` weighing each sample by its importance weight against the
    policy that played it, where TRL does not (no vLLM)."""

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        sampled = output.get("sampling_per_token_logps")
        if sampled is None or not self.model.training:  # evaluation plays fresh batches
            return output
        proximal = output.get("old_per_token_logps")
        if proximal is None:  # TRL skips them when a batch is trained in one step
            proximal = self._proximal_logps(output)
            output["old_per_token_logps"] = proximal
        mask = output["completion_mask"] * output.get("tool_mask", 1)
        args = self.args
        weights = importance_weights(
            proximal, sampled, mask, args.vllm_importance_sampling_mode,
            args.vllm_importance_sampling_clip_min, args.vllm_importance_sampling_clip_max,
        )  # fmt: skip
        output["advantages"] = output["advantages"].unsqueeze(1) * weights
        kept = weights.expand_as(mask)[mask.bool()]
        if kept.numel():
            metrics = self._metrics["train"]
            for name, value in (("min", kept.min()), ("mean", kept.mean()), ("max", kept.max())):
                metrics[f"sampling/importance_sampling_ratio/{name}"].append(value.item())
        return output

    @torch.no_grad()
    def _proximal_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """The completion tokens' logprobs under the trainer's policy now, at the start
        of the batch's training."""
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        logps, _, _ = self._get_per_token_logps_and_entropies(
            self.model, ids, attention, output["completion_ids"].size(1),
            batch_size=self.args.per_device_train_batch_size,
        )  # fmt: skip
        return logps
