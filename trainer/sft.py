"""``wander train sft``: supervised warm-up on chat transcripts (the archive's export)."""

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


def build_trainer(
    rows: list[dict[str, Any]], model: Any, tokenizer: Any, options: dict[str, Any]
) -> Any:
    """TRL's SFTTrainer on the transcripts, the loss on the assistant's turns only."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from wander.trainer.models import device_defaults

    defaults = {
        "report_to": "none",
        "save_strategy": "no",
        "gradient_checkpointing": False,  # small models: memory is not the problem
        "assistant_only_loss": "{% generation %}" in (tokenizer.chat_template or ""),
        **device_defaults(),
    }
    args = SFTConfig(**{**defaults, **options})
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
