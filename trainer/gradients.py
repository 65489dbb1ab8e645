"""A guard that stops training before a non-finite gradient reaches the weights.

Without it, one NaN or infinite gradient (mixed precision, a learning rate too high
for the model) silently turns every weight into NaN; the run goes on, and Wander's
rollout then samples from NaN probabilities: on a GPU a device-side assert many
steps later, which names neither the step nor the cause (seen on an H100 in
bench.learning's larger model). Checked after clipping, before the optimizer step,
so the weights and the last checkpoint stay as they were. Not under fp16's loss
scaling: there an overflowing gradient is expected, and the scaler skips that step
and lowers its scale.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


class NonFiniteGradientError(RuntimeError):
    """The gradient of an optimizer step holds a NaN or an infinity."""


class FiniteGradients(TrainerCallback):
    """Raises ``NonFiniteGradientError`` at the first optimizer step whose gradient is not
    finite, before that step is taken. One device synchronization per step."""

    def on_pre_optimizer_step(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        optimizer: Any = None,
        **kwargs: Any,
    ) -> None:
        if model is None or getattr(optimizer, "scaler", None) is not None:
            return
        grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
        if not grads or bool(torch.stack(torch._foreach_norm(grads)).isfinite().all()):
            return
        bad = [
            name
            for name, p in model.named_parameters()
            if p.grad is not None and not bool(p.grad.isfinite().all())
        ]
        raise NonFiniteGradientError(
            f"the gradient of optimizer step {state.global_step + 1} is not finite (in "
            f"{len(bad)} parameters, the first {bad[0]}); stopped before it reached the "
            f"weights. Lower the learning rate ({args.learning_rate:g}) or train in "
            "float32 (bf16 = false)"
        )
