"""SFT's loss is on the assistant's turns only, whatever the model's chat template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trl import chat_template_utils
from typer.testing import CliRunner

from wander.cli import app as cli
from wander.trainer.sft import build_trainer
from wander.trainer.tiny import CHAT_TEMPLATE, build_model, build_tokenizer

TRANSCRIPT = [
    {"role": "system", "content": "SYSTEM: play X"},
    {"role": "user", "content": "BOARD one. Your turn."},
    {"role": "assistant", "content": "<think>centre</think><move>4</move>"},
    {"role": "user", "content": "BOARD two. Your turn."},
    {"role": "assistant", "content": "<think>corner</think><move>0</move>"},
]

TEMPLATES = {
    "tiny": CHAT_TEMPLATE,
    # Hub models' templates without {% generation %} markers, as TRL ships them: SFT
    # tokenizes with TRL's training copy of each.
    **{
        name: getattr(chat_template_utils, f"{name}_chat_template")
        for name in ("qwen2_5", "qwen3", "llama3", "gemma3", "lfm2")
    },
}


def trained_text(trainer: Any, tokenizer: Any) -> tuple[str, str]:
    """The text of a collated batch's tokens that carry a label, and of those that do not."""
    batch = trainer.data_collator([trainer.train_dataset[0]])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = [token for token, label in zip(ids, labels, strict=True) if label != -100]
    masked = [token for token, label in zip(ids, labels, strict=True) if label == -100]
    return tokenizer.decode(trained), tokenizer.decode(masked)


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_loss_is_on_the_assistants_tokens_only(name: str, tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = TEMPLATES[name]
    assert name == "tiny" or not chat_template_utils.has_generation_markers(TEMPLATES[name])
    options = {"output_dir": str(tmp_path), "max_steps": 1}
    trainer = build_trainer([{"messages": TRANSCRIPT}], build_model(tokenizer), tokenizer, options)
    trained, masked = trained_text(trainer, tokenizer)
    # The assistant's answers are trained on, in order; nothing else is.
    assert trained.index("<move>4</move>") < trained.index("<move>0</move>")
    assert "centre" in trained and "corner" in trained
    assert not any(shown in trained for shown in ("SYSTEM", "BOARD", "Your turn", "user", "system"))
    assert "SYSTEM: play X" in masked and masked.count("BOARD") == 2


NO_MARKERS = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
)


def test_a_template_without_markers_or_a_training_copy_is_refused(tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = NO_MARKERS
    with pytest.raises(ValueError, match="no \\{% generation %\\} markers"):
        build_trainer(
            [{"messages": TRANSCRIPT}], build_model(tokenizer), tokenizer,
            {"output_dir": str(tmp_path), "max_steps": 1},
        )  # fmt: skip


def test_wander_train_sft_names_the_template_it_refuses(tmp_path: Path) -> None:
    import json

    data = tmp_path / "games.jsonl"
    data.write_text(json.dumps({"messages": TRANSCRIPT}) + "\n")
    template = tmp_path / "plain.jinja"
    template.write_text(NO_MARKERS)
    runner = CliRunner(env={"COLUMNS": "200"})
    command = ["train", "sft", "--data", str(data), "--output-dir", str(tmp_path / "out"),
               "--max-steps", "1", "--batch-size", "1"]  # fmt: skip
    refused = runner.invoke(cli, [*command, "--chat-template", str(template)])
    assert refused.exit_code == 2 and "{% generation %}" in refused.output
    template.write_text(CHAT_TEMPLATE)  # a template of one's own, with the markers
    trained = runner.invoke(cli, [*command, "--chat-template", str(template)])
    assert trained.exit_code == 0, trained.output
