"""Loading the policy (a hub model, a folder, or the offline tiny one) and saving it
at the end of a stage."""

from __future__ import annotations

from pathlib import Path
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
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return pretrained(model), tokenizer


def pretrained(model: str) -> Any:
    """``from_pretrained``, with a LoRA adapter merged into its base model.

    TRL saves each checkpoint of a LoRA run as the adapter alone
    (``adapter_config.json``). transformers would load such a folder as the base
    model with the adapter attached, and the run's ``[peft]`` then puts a fresh
    adapter in its place: the run would start from the base model, silently. Merged,
    the folder starts the run where the checkpoint was.
    """
    if (Path(model) / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(model).merge_and_unload()
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model)


def save(trainer: Any, tokenizer: Any, folder: str) -> None:
    """The end of a stage: the full weights, a LoRA adapter merged into them, and the
    tokenizer, in ``folder``. Every process of the run calls it.

    ``Trainer.save_model`` writes a LoRA run's adapter alone, which ``vllm serve``
    cannot load and from which the next stage (``model = "runs/grpo-stage1"``) would
    start on the base model (see ``pretrained``). Merged, the folder is a model like
    any other: the next stage, ``vllm serve`` and ``from_pretrained`` load it as it
    is, with the logits the stage ended on.

    The weights come from ``accelerator.get_state_dict``, accelerate's way to the
    whole model whatever holds it: under ZeRO-3 or FSDP each process holds a shard
    and every process takes part in gathering them; the main process writes.
    """
    accelerator = trainer.accelerator
    state = accelerator.get_state_dict(trainer.model_wrapped)
    if accelerator.is_main_process:
        model = accelerator.unwrap_model(trainer.model)
        from peft import PeftModel

        if isinstance(model, PeftModel):
            model, state = merged(model, state)
        model.save_pretrained(folder, state_dict=state)
        tokenizer.save_pretrained(folder)
    accelerator.wait_for_everyone()


def merged(model: Any, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``model``'s base model with its adapter merged in, and its weights, built from
    ``state`` (``model``'s whole state dict): under ZeRO-3 or FSDP ``model`` itself
    holds this process's shard only. ``model`` is left as it is (the merge works on
    copies, on the CPU)."""
    import torch
    from peft import get_peft_model

    base = model.get_base_model()
    with torch.device("meta"):
        skeleton = get_peft_model(type(base)(base.config), model.peft_config[model.active_adapter])
    copies = {name: tensor.detach().to("cpu", copy=True) for name, tensor in state.items()}
    skeleton.load_state_dict(copies, assign=True)
    whole = skeleton.merge_and_unload()
    whole.generation_config = base.generation_config  # the checkpoint's, not a default one
    return whole, whole.state_dict()


def device_defaults() -> dict[str, bool]:
    """Trainer options for the machine: CPU and no bf16 where there is no GPU, so that
    the same config runs on a laptop (a config's own options still win)."""
    import torch

    return {} if torch.cuda.is_available() else {"use_cpu": True, "bf16": False}
