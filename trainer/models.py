"""Loading the policy: a hub model, or the offline tiny one."""

from __future__ import annotations

from typing import Any


def load(model: str, *, tools: bool = False) -> tuple[Any, Any]:
    """``(model, tokenizer)``; ``tiny`` builds both offline, anything else is
    ``from_pretrained`` (hub id or local path), as users expect. ``tools``: the tiny
    tokenizer gets a chat template TRL's tool loop accepts (a hub model's own
    template is its own affair)."""
    if model == "tiny":
        from wander.trainer.tiny import build_model, build_tokenizer

        tokenizer = build_tokenizer(tools=tools)
        return build_model(tokenizer), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(model), tokenizer


def device_defaults() -> dict[str, bool]:
    """Trainer options for the machine: CPU and no bf16 where there is no GPU, so that
    the same config runs on a laptop (a config's own options still win)."""
    import torch

    return {} if torch.cuda.is_available() else {"use_cpu": True, "bf16": False}
