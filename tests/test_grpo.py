"""A couple of GRPO steps of the tiny model against a live service, on CPU."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from wander.cli import app as cli
from wander.client import WanderClient
from wander.service.archive.migrations import upgrade
from wander.testing import ServiceProcess
from wander.trainer.config import GRPORunConfig, load_config
from wander.trainer.grpo import CISPO_EPSILON_HIGH, build_trainer, stratified_order
from wander.trainer.models import load


@pytest.fixture
def service(plugin_site: Path, tmp_path: Path) -> Iterator[ServiceProcess]:
    database = f"sqlite:///{tmp_path}/archive.db"
    upgrade(database)
    env = {"PYTHONPATH": str(plugin_site), "WANDER_REDIS_URL": "", "WANDER_DATABASE_URL": database}
    process = ServiceProcess(env).start()
    yield process
    process.stop()


def test_grpo_steps_train_on_the_models_tokens_only(
    service: ServiceProcess, tmp_path: Path
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    run = GRPORunConfig(
        model="tiny",
        url=service.url,
        env="digits",  # graded rewards: an untrained model's samples already differ
        examples=8,
        run="grpo-e2e",
        output_dir=str(tmp_path / "out"),
        max_completion_length=128,
        sampling={"max_tokens_per_turn": 16, "temperature": 1.0},
        grpo={
            "num_generations": 4, "generation_batch_size": 8, "per_device_train_batch_size": 8,
            "max_steps": 2, "learning_rate": 1e-2, "logging_steps": 1, "use_cpu": True,
            "save_strategy": "no", "loss_type": "cispo",
        },
    )  # fmt: skip
    model, tokenizer = load("tiny")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        rollout = trainer.rollout_func
        outputs: list[dict[str, Any]] = []
        trainer.rollout_func = lambda prompts, t: outputs.append(rollout(prompts, t)) or outputs[-1]
        trainer.train()
        for _ in range(50):  # the archive writes behind (the run is unknown until then)
            if any(r.run == "grpo-e2e" and r.episodes == 16 for r in client.runs().runs):
                break
            time.sleep(0.1)
        page = client.episodes("grpo-e2e", limit=1000)

    assert trainer.args.epsilon_high == CISPO_EPSILON_HIGH  # not TRL's 0.2 fallback
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert any(not (before[n] == p).all() for n, p in model.named_parameters())

    # Every episode of the run is archived; each group of 4 shares example and seed.
    assert page.total == 16
    groups: dict[str, set[tuple[int, int]]] = {}
    for episode in page.episodes:
        groups.setdefault(episode.group, set()).add((episode.example, episode.seed))
    assert len(groups) == 4 and all(len(members) == 1 for members in groups.values())

    # Two turns each: the environment's reply sits between the model's turns, masked.
    for output in outputs:
        for ids, mask in zip(output["completion_ids"], output["env_mask"], strict=True):
            env_part = [t for t, m in zip(ids, mask, strict=True) if m == 0]
            assert "Once more." in tokenizer.decode(env_part)
            assert mask[0] == 1 and mask[-1] == 1 and 0 in mask
        assert len(set(output["digits"])) > 1  # something to learn from


def test_batches_are_stratified() -> None:
    order = stratified_order(20, 5, seed=3)
    assert sorted(order) == list(range(20))
    for start in range(0, 20, 5):
        assert sorted(i % 5 for i in order[start : start + 5]) == [0, 1, 2, 3, 4]


def test_the_config_refuses_unstratified_batches() -> None:
    with pytest.raises(ValueError, match="num_groups"):
        GRPORunConfig(env_config={"num_groups": 4},
                      grpo={"num_generations": 8, "generation_batch_size": 256})  # fmt: skip


@pytest.mark.parametrize("name", ["stage1", "stage2"])
def test_the_talks_configs_load(name: str) -> None:
    run = load_config(Path(__file__).parents[1] / "trainer" / "configs" / f"{name}.toml")
    assert run.grpo["loss_type"] == "cispo" and run.peft == {
        "r": 8, "lora_alpha": 16, "target_modules": "all-linear"
    }  # fmt: skip
    assert run.grpo["generation_batch_size"] == 256 and run.grpo["num_generations"] == 8
    assert run.env_config["num_groups"] == 32


def test_wander_train_warmup_data_then_sft(service: ServiceProcess, tmp_path: Path) -> None:
    data = tmp_path / "warmup.jsonl"
    made = CliRunner().invoke(
        cli, ["train", "warmup-data", "-o", str(data), "-n", "6", "--url", service.url,
              "--noise", "0",
              "--config", '{"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}'],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 6 and "Wrote 6 of 6 games" in made.output  # noiseless minimax never loses
    assert all("<think>" in row["messages"][-1]["content"] for row in rows)
    trained = CliRunner().invoke(
        cli, ["train", "sft", "--data", str(data), "--output-dir", str(tmp_path / "sft"),
              "--max-steps", "2", "--batch-size", "2"],
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert (tmp_path / "sft" / "config.json").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    refused = CliRunner().invoke(cli, ["train", "sft", "--data", str(empty)])
    assert refused.exit_code == 2 and "no chat transcripts" in refused.output
