"""A non-finite gradient stops training before it reaches the weights."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import TrainerCallback

from tests.test_sft import TRANSCRIPT
from wander.trainer.gradients import FiniteGradients, NonFiniteGradientError
from wander.trainer.sft import build_trainer
from wander.trainer.tiny import build_model, build_tokenizer


class Snapshots(TrainerCallback):
    """The model's weights after each optimizer step."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        self.weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})


def test_a_nan_gradient_stops_the_run_with_the_weights_as_they_were(tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    options = {"output_dir": str(tmp_path), "max_steps": 3, "learning_rate": 1e-2}
    trainer = build_trainer([{"messages": TRANSCRIPT}] * 4, model, tokenizer, options)
    snapshots = Snapshots()
    trainer.add_callback(snapshots)
    # Step 1 trains; in step 2 one weight's gradient is NaN, as mixed precision or a
    # learning rate too high for the model can make it.
    weight = dict(model.named_parameters())["model.norm.weight"]
    weight.register_hook(lambda grad: grad * float("nan") if snapshots.weights else grad)

    # (Clipping by the total norm spreads the NaN to every gradient.)
    expected = r"optimizer step 2 is not finite \(in \d+ parameters.*learning rate \(0.01\)"
    with pytest.raises(NonFiniteGradientError, match=expected):
        trainer.train()
    [after_step_1] = snapshots.weights
    for name, value in model.state_dict().items():
        assert value.isfinite().all() and torch.equal(value, after_step_1[name]), name


def test_under_fp16_loss_scaling_an_overflow_is_left_to_the_scaler() -> None:
    """fp16's gradient scaler expects overflowing steps: it skips them and lowers its
    scale, so the run must go on; without a scaler the same gradient stops it."""
    model = torch.nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    model.weight.grad[0, 0] = float("inf")
    check = FiniteGradients().on_pre_optimizer_step
    args, state = SimpleNamespace(learning_rate=1e-3), SimpleNamespace(global_step=6)
    scaled = SimpleNamespace(scaler=torch.amp.GradScaler("cpu"))
    check(args, state, None, model=model, optimizer=scaled)  # type: ignore[arg-type]
    unscaled = SimpleNamespace(scaler=None)
    expected = r"step 7 is not finite \(in 1 parameters, the first weight\)"
    with pytest.raises(NonFiniteGradientError, match=expected):
        check(args, state, None, model=model, optimizer=unscaled)  # type: ignore[arg-type]
