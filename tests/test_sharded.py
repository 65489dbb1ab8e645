"""A model sharded by FSDP 2 across 2 CPU processes (gloo), as ``accelerate launch``
with an FSDP config shards it on GPUs: sampling, where every forward pass is a
collective of both processes, and the merged weights a LoRA run saves, built from
the shards accelerate gathers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

from wander.testing import free_port
from wander.trainer.tiny import build_tokenizer

PROMPTS = [2, 0]  # process 0 samples for 2 prompts; process 1 has none left
TEXT = "Your move. <think>"


def lora_model(tokenizer: Any) -> Any:
    """The tiny model with a LoRA adapter whose weights are not zero (as after training)."""
    from peft import LoraConfig, get_peft_model

    from wander.trainer.tiny import build_model

    config = LoraConfig(task_type="CAUSAL_LM", r=8, lora_alpha=16, target_modules="all-linear")
    model = get_peft_model(build_model(tokenizer), config)
    torch.manual_seed(1)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.1)
    return model


def sharded(rank: int, folder: Path) -> None:
    """One of the 2 processes (``python -m tests.test_sharded FOLDER``, with ``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its environment)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import fully_shard

    from wander.trainer.backends import Sampling, TransformersBackend
    from wander.trainer.models import merged

    dist.init_process_group("gloo")
    try:
        tokenizer = build_tokenizer()
        model = lora_model(tokenizer)
        for layer in model.get_base_model().model.layers:
            fully_shard(layer)
        fully_shard(model.get_base_model())  # the root generate's forward passes go through
        backend = TransformersBackend(model, tokenizer, Sampling(max_new_tokens=8))
        generations = backend.generate([tokenizer.encode(TEXT)] * PROMPTS[rank])
        assert len(generations) == PROMPTS[rank]
        # The whole weights as accelerate's get_state_dict gathers them under FSDP 2.
        state = get_model_state_dict(
            model,
            options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True, cpu_offload=True
            ),
        )
        if rank == 0:
            whole, weights = merged(model, state)
            whole.save_pretrained(folder, state_dict=weights)
    finally:
        dist.destroy_process_group()


def test_sharded_processes_sample_in_step_and_save_the_merged_model(tmp_path: Path) -> None:
    group = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.test_sharded", str(tmp_path)],
            cwd=Path(__file__).parents[1],
            env={**os.environ, **group, "RANK": str(rank)},
        )
        for rank in (0, 1)
    ]
    try:
        codes = [process.wait(timeout=90) for process in processes]
    except subprocess.TimeoutExpired:
        pytest.fail("the processes hung: one sampled alone with a sharded model")
    finally:
        for process in processes:
            process.kill()
            process.wait()
    assert codes == [0, 0]

    # The saved model is the adapted one, whole: its logits are the unsharded
    # LoRA model's.
    tokenizer = build_tokenizer()
    ids = torch.tensor([tokenizer.encode(TEXT)])
    with torch.no_grad():
        expected = lora_model(tokenizer)(input_ids=ids).logits
        saved = AutoModelForCausalLM.from_pretrained(tmp_path)(input_ids=ids).logits
    torch.testing.assert_close(saved, expected, atol=1e-5, rtol=1e-4)


if __name__ == "__main__":
    sharded(int(os.environ["RANK"]), Path(sys.argv[1]))
