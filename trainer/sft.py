"""``wander train sft``: supervised warm-up on chat transcripts (the archive's export).

The loss is on the assistant's turns only. A transcript is mostly what the model
is shown, not what it says: the system prompt, the boards, the environment's
replies; trained on all of it, a warm-up spends most of its gradient teaching the
model to write the environment's side of the game. TRL masks the rest out with
the chat template's ``{% generation %}`` markers; for a template without them,
TRL ships a training copy of the usual families' templates (Qwen2.5, Qwen3,
Llama 3, Gemma, LFM2, Phi-3, ...) and tokenizes with it. A template that has
neither is refused, not trained on whole (``chat_template_path`` gives a template
of one's own, with the markers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_transcripts(path: Path) -> list[dict[str, Any]]:
    """``{"messages": [...]}`` per line, as ``wander export`` writes them."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    if not rows or not all(isinstance(row.get("messages"), list) for row in rows):
        raise ValueError(f"{path} holds no chat transcripts ({{'messages': [...]}} per line)")
    return rows


def check_assistant_masks(tokenizer: Any) -> None:
    """Refuse a chat template that cannot mark the assistant's tokens: no
    ``{% generation %}`` markers and no training copy in TRL. TRL would say so too,
    but only once the trainer is being built, and without saying what is at stake."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        get_training_chat_template(tokenizer)
    except ValueError as exc:
        raise ValueError(
            "the model's chat template has no {% generation %} markers and TRL ships no "
            "training copy of it, so SFT cannot put the loss on the assistant's turns only "
            "(it would train on the whole conversation: system prompt, boards, the "
            "environment's turns). Give a copy of the template with the assistant's turns "
            "inside {% generation %}...{% endgeneration %} (wander train sft --chat-template "
            "FILE.jinja; TRL's trl/chat_templates/*_training.jinja show how)"
        ) from exc


def build_trainer(
    rows: list[dict[str, Any]], model: Any, tokenizer: Any, options: dict[str, Any]
) -> Any:
    """TRL's SFTTrainer on the transcripts, the loss on the assistant's turns only
    (see the module docstring); ``options`` are SFTConfig's, and win over these."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from wander.trainer.gradients import FiniteGradients
    from wander.trainer.models import device_defaults

    defaults = {
        "report_to": "none",
        "save_strategy": "no",
        "gradient_checkpointing": False,  # small models: memory is not the problem
        "assistant_only_loss": True,
        **device_defaults(),
    }
    args = SFTConfig(**{**defaults, **options})
    if args.assistant_only_loss and args.chat_template_path is None:
        check_assistant_masks(tokenizer)
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[FiniteGradients()],
    )
