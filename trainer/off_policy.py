"""TRL's ``GRPOTrainer`` for samples of an older policy (asynchronous rollouts).

TRL's clipped ratio divides each token's probability under the policy being trained
by its probability under the "old" policy. Without vLLM, TRL takes the old policy to
be the current one at generation time (the ratio is then 1 at the first update),
which is right for a batch sampled by that policy and wrong for one played ahead by
an earlier one. Here the old logprobs are the sampling logprobs the rollout returned
(the distribution each token was drawn from, temperature applied, as the loss
computes it), so the ratio is the importance weight against the policy that played
the sample, clipped by the loss as any ratio (``epsilon``, or CISPO's
``epsilon_high``).
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer


class OffPolicyGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose old logprobs are the sampling policy's."""

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        sampled = output.get("sampling_per_token_logps")
        if sampled is not None:
            output["old_per_token_logps"] = sampled
        return output
