"""The transformers backend with a model sharded by FSDP across 2 CPU processes
(gloo): every forward pass is a collective of both, so a process whose episodes
have ended must still sample while the other does."""

from __future__ import annotations

import os
import time

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from wander.testing import free_port

PROMPTS = [2, 0]  # process 0 samples for 2 prompts; process 1 has none left


def sample_sharded(rank: int, port: int) -> None:
    from torch.distributed.fsdp import fully_shard

    from wander.trainer.backends import Sampling, TransformersBackend
    from wander.trainer.tiny import build_model, build_tokenizer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        backend = TransformersBackend(model, tokenizer, Sampling(max_new_tokens=8))
        prompts = [tokenizer.encode("Your move.")] * PROMPTS[rank]
        generations = backend.generate(prompts)
        assert len(generations) == PROMPTS[rank]
    finally:
        dist.destroy_process_group()


def test_a_process_with_nothing_to_sample_keeps_a_sharded_model_going() -> None:
    context = mp.start_processes(
        sample_sharded, args=(free_port(),), nprocs=2, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + 90
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the processes hung: one sampled alone with a sharded model")
