"""A couple of GRPO steps of the tiny model against a live service, on CPU."""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM, TrainerCallback
from typer.testing import CliRunner

from tests.helpers import DeletingClient, archived, plugin_service
from wander.cli import app as cli
from wander.client import Score, WanderClient
from wander.testing import ServiceProcess, free_port, wait_until
from wander.trainer.backends import Sampling
from wander.trainer.batches import stratified_order, training_rows
from wander.trainer.config import EnvironmentEntry, GRPORunConfig, load_config
from wander.trainer.gradients import FiniteGradients
from wander.trainer.grpo import CISPO_EPSILON_HIGH, build_trainer, trl_args
from wander.trainer.models import load
from wander.trainer.rollout import Task, WanderRollout, example_prompt
from wander.trainer.tool_environment import WanderToolEnvironment, tool_environment, wander_score
from wander.trainer.tool_methods import tool_method


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service for the module (each test plays under a run label of its own)."""
    with plugin_service(plugin_site, tmp_path_factory.mktemp("archive")) as process:
        yield process


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


def digits_run(
    url: str, tmp_path: Path, label: str, grpo: dict[str, Any], **options: Any
) -> GRPORunConfig:
    """GRPO of the tiny model on ``digits`` (graded rewards: an untrained model's samples
    already differ) under the run label ``label``: 8 examples, batches of 2 groups of 4,
    8-token turns; ``grpo`` and ``options`` on top."""
    return GRPORunConfig(
        model="tiny", url=url, env="digits", examples=8, run=label,
        output_dir=str(tmp_path / "out"), max_completion_length=64,
        sampling={"max_tokens_per_turn": 8},
        grpo={
            "num_generations": 4, "generation_batch_size": 8, "per_device_train_batch_size": 8,
            "logging_steps": 1, "save_strategy": "no", **grpo,
        },
        **options,
    )  # fmt: skip


def test_a_failed_episode_is_left_out_and_counted_by_grpo(
    service: ServiceProcess, tmp_path: Path
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    run = digits_run(service.url, tmp_path, "grpo-failed", {"max_steps": 1}, max_failure_rate=0.2)
    model, tokenizer = load("tiny")
    with DeletingClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        rollout = trainer.rollout_func
        outputs: list[dict[str, Any]] = []
        trainer.rollout_func = lambda prompts, t: outputs.append(rollout(prompts, t)) or outputs[-1]
        trainer.train()

    # One of the 8 episodes failed (1/8 is within max_failure_rate = 0.2): its reward is
    # None, the step trained on the other 7, and the count is in the step's metrics.
    [output] = outputs
    [deleted] = client.deleted
    rewards = dict(zip(output["episode_id"], output["digits"], strict=True))
    assert rewards.pop(deleted) is None and None not in rewards.values()
    [logged] = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logged["wander/failed_episodes"] == 1.0 and math.isfinite(logged["loss"])


class StepTimes(TrainerCallback):
    """When each optimizer step began and ended."""

    def __init__(self) -> None:
        self.began: list[float] = []
        self.ended: list[float] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.began.append(time.monotonic())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.ended.append(time.monotonic())


def test_asynchronous_rollouts_play_the_next_batch_while_the_trainer_trains(
    service: ServiceProcess, tmp_path: Path
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    grpo = {"max_steps": 3, "learning_rate": 1e-2, "loss_type": "cispo"}
    run = digits_run(service.url, tmp_path, "grpo-async", grpo, max_staleness=1)
    model, tokenizer = load("tiny")
    times = StepTimes()
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        trainer.add_callback(times)
        played = trainer.rollout_func.train
        trainer.train()
        episodes = archived(client, "grpo-async", 24).total

    assert type(trainer).__name__ == "OffPolicyGRPOTrainer"
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert all(math.isfinite(step["loss"]) for step in steps)
    # Each sequence is weighed by its importance weight against the policy that played
    # it (TRL's default: sequence_mask, up to 3): 1 for the first batch, played by the
    # policy it trains; the second was played by that first policy too, while the first
    # step trained, so its weights spread from 1 wherever that step moved the policy:
    # Adam's first step at lr 1e-2 moves it a lot on any gradient, and not at all where
    # every group's rewards were alike (no advantage). Their mean stays near 1 either way
    # (an importance weight's expectation under the policy that sampled is 1: in CI once,
    # 0.9999995 after a step of gradient norm 1.19), so the spread is what tells. (The
    # third's policy is a step old as well, but by then the rate has decayed.)
    ratio = "sampling/importance_sampling_ratio"
    spreads = [step[f"{ratio}/max"] - step[f"{ratio}/min"] for step in steps]
    weights = [step[f"{ratio}/mean"] for step in steps]
    assert weights[0] == pytest.approx(1.0, abs=1e-4) and spreads[0] < 1e-4, (weights, spreads)
    assert (spreads[1] > 1e-2) == (steps[0]["grad_norm"] > 0), (spreads, steps[0])
    assert all(0 < weight <= 3 for weight in weights[1:]), weights
    # The first batch was played by the initial policy for the first step; each later one
    # by the policy one step older than the one it trained, and was begun while the
    # trainer was still training on the batch before (it ended with the step at latest).
    assert [step["wander/staleness"] for step in steps] == [0.0, 1.0, 1.0]
    assert [(start.batch, start.version) for start in played.starts] == [(0, 0), (1, 0), (2, 1)]
    for later, step_end in zip(played.starts[1:], times.ended[:2], strict=True):
        assert later.started < step_end
    # Three batches asked for, three played (none ahead of a step that never came), each
    # of 2 groups of 4 episodes, every one archived.
    assert episodes == 24 and played.pool._shutdown


def test_a_batch_played_ahead_is_the_one_asked_for_or_is_dropped(
    service: ServiceProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch asked for that was not predicted (a resumed run's first) is played there
    and then; the batch played ahead is dropped, and the plan goes on after it."""
    from wander.trainer.async_rollout import AsyncRollout, batch_plan

    model, tokenizer = load("tiny")
    state = SimpleNamespace(global_step=0)
    alone = SimpleNamespace(unwrap_model=lambda m: m, process_index=0, num_processes=1)
    trainer = SimpleNamespace(state=state, model=model, accelerator=alone)
    plan = batch_plan([example_prompt(i) for i in range(4)], groups=1, generations=2)
    with DeletingClient(service.url, at=1) as client:
        rollout = WanderRollout(client, tokenizer, [Task("digits", ["digits"])], run="async-plan",
                                sampling=Sampling(4), max_failure_rate=0.5)  # fmt: skip
        played = AsyncRollout(rollout, plan, ahead=1, max_staleness=1)
        with caplog.at_level(logging.WARNING, logger="wander.trainer.rollout"):
            first = played(plan[2], trainer)  # not predicted: played now, and plan[3] ahead
        # Its failed episode is judged when the batch is asked for, and said once.
        warned = [r.getMessage() for r in caplog.records]
        [warned] = [message for message in warned if "of the batch failed" in message]
        assert warned.startswith("1 of 2 episodes of the batch failed")
        assert "is aborted" in warned  # how the first failed (the service had aborted it)
        assert first["wander_failed"].count(True) == 1
        played(plan[0], trainer)  # not predicted either: plan[3] dropped, plan[1] ahead
        state.global_step = 1
        output = played(plan[1], trainer)  # predicted: played ahead by step 0's policy
        played.close()
    assert [start.batch for start in played.starts] == [2, 3, 0, 1, 2]
    assert output["wander_staleness"] == [1, 1] and len(set(output["episode_id"])) == 2
    assert not played.ahead and played.pool._shutdown


def test_a_weight_sync_asked_for_during_a_request_goes_before_the_next_one() -> None:
    """On a vLLM server, TRL's sync waits for the request in flight, and the rollout's
    next request, asked the moment that one ends, waits for the sync."""
    from wander.trainer.async_rollout import ServedBackend, ServedWeights

    events: list[str] = []
    in_flight, asked = threading.Event(), threading.Event()

    class Server:
        def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Any]:
            events.append("request")
            in_flight.set()
            asked.wait(10)
            return []

    generation = SimpleNamespace(vllm_client=None, sync_weights=lambda: events.append("sync"))
    weights = ServedWeights()
    weights.publish(SimpleNamespace(state=SimpleNamespace(global_step=0),
                                    vllm_generation=generation))  # fmt: skip
    backend = ServedBackend(Server(), weights)  # type: ignore[arg-type]
    playing = threading.Thread(target=lambda: [backend.generate([[1]]) for _ in range(3)])
    playing.start()
    in_flight.wait(10)
    syncing = threading.Thread(target=generation.sync_weights)  # as TRL calls it, wrapped
    syncing.start()
    wait_until(weights.turnstile.locked, "the sync was not asked for", timeout=10)
    asked.set()  # the request in flight ends; the sync waits for its lock
    playing.join(10)
    syncing.join(10)
    assert events == ["request", "sync", "request", "request"]


@pytest.mark.parametrize(
    ("mode", "low", "high", "expected"),
    [
        ("token_truncate", None, 3.0, [[1.0, 3.0, 0.5], [1.0, 1.0, 1.0]]),
        ("token_mask", 0.6, 3.0, [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
        ("sequence_truncate", None, 1.5, [[1.5], [1.0]]),  # the first: 1 x 4 x 0.5
        ("sequence_mask", None, 1.5, [[0.0], [1.0]]),
        ("sequence_truncate", 1.5, None, [[2.0], [1.5]]),
    ],
)
def test_a_stale_samples_weight_is_read_as_trl_reads_it(
    mode: str, low: float | None, high: float | None, expected: list[list[float]]
) -> None:
    """The weight of a sample played by an older policy, exp(proximal - sampled), per
    token or per sequence (over its unmasked tokens), truncated or masked by TRL's
    vllm_importance_sampling_* settings; a token without a sampling logprob weighs 1."""
    from wander.trainer.off_policy import importance_weights

    proximal = torch.tensor([[0.0, math.log(4), math.log(0.5)], [0.0, 0.0, 9.0]])
    sampled = torch.tensor([[0.0, 0.0, 0.0], [float("nan"), 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the last: an env token
    weights = importance_weights(proximal, sampled, mask, mode, low, high)
    assert weights.shape == (2, len(expected[0]))
    assert weights.flatten().tolist() == pytest.approx(torch.tensor(expected).flatten().tolist())


def test_asynchronous_rollouts_are_refused_where_they_cannot_run() -> None:
    from trl import GRPOConfig

    from wander.trainer import async_rollout

    with pytest.raises(ValueError, match="max_staleness is for rollout"):
        GRPORunConfig(rollout="environment_factory", max_staleness=1)
    options = {"output_dir": "/tmp/unused", "report_to": "none", "use_cpu": True,
               "shuffle_dataset": False}  # fmt: skip
    args = GRPOConfig(**options, per_device_train_batch_size=8, num_generations=4,
                      steps_per_generation=2)  # fmt: skip
    with pytest.raises(ValueError, match="less than the 2 between two generation batches"):
        async_rollout.ahead(1, args)
    assert async_rollout.ahead(4, args) == 2
    async_rollout.check(args, 2)  # several processes, each with its copy of the model
    served = GRPOConfig(**options, use_vllm=True, vllm_mode="server")
    async_rollout.check(served, 1)
    with pytest.raises(ValueError, match="this run has 2, and TRL's client"):
        async_rollout.check(served, 2)
    with pytest.raises(ValueError, match="DeepSpeed and FSDP shard it"):
        async_rollout.check(GRPOConfig(**options, fsdp="full_shard"), 2)
    with pytest.raises(ValueError, match="unshuffled"):
        async_rollout.check(GRPOConfig(**{**options, "shuffle_dataset": True}), 1)
    uncorrected = {"use_vllm": True, "vllm_mode": "server",
                   "vllm_importance_sampling_correction": False}  # fmt: skip
    with pytest.raises(ValueError, match=r"leave grpo\.vllm_importance_sampling_correction"):
        GRPORunConfig(max_staleness=1, grpo=uncorrected)
    with pytest.raises(ValueError, match="'sequence' is none of TRL's: token_truncate, "):
        GRPORunConfig(max_staleness=1, grpo={"vllm_importance_sampling_mode": "sequence"})


def test_on_a_vllm_server_stale_samples_are_weighed_by_trls_own_correction(
    service: ServiceProcess, tmp_path: Path
) -> None:
    """TRL weighs vLLM's samples against the trainer's policy itself: asynchronous
    rollouts on a server use TRL's trainer as it is (weighing them twice, as Wander's
    own correction on top would, trained on the square of the weight)."""
    from wander.trainer.grpo import asynchronous, rollout_func_plan

    served = {"use_vllm": True, "vllm_mode": "server", "max_steps": 2}
    _, tokenizer = load("tiny")
    for grpo, expected in (({"max_steps": 2}, "OffPolicyGRPOTrainer"), (served, "GRPOTrainer")):
        run = digits_run(service.url, tmp_path, "async-class", grpo, max_staleness=1)
        with WanderClient(service.url) as client:
            plan = rollout_func_plan(run, client, tokenizer)
            dataset = [plan.row(*row) for row in training_rows(run.entries(), 8, 2, 0)]
            trainer_class, closing = asynchronous(run, trl_args(run), plan, dataset)
            closing.rollout.close()
        assert trainer_class.__name__ == expected


def test_batches_are_stratified() -> None:
    order = stratified_order(20, 5, seed=3)
    assert sorted(order) == list(range(20))
    for start in range(0, 20, 5):
        assert sorted(i % 5 for i in order[start : start + 5]) == [0, 1, 2, 3, 4]


def test_the_config_refuses_unstratified_batches() -> None:
    with pytest.raises(ValueError, match="num_groups"):
        GRPORunConfig(env_config={"num_groups": 4},
                      grpo={"num_generations": 8, "generation_batch_size": 256})  # fmt: skip


def test_a_mixtures_batches_draw_groups_by_weight() -> None:
    entries = [
        EnvironmentEntry(env="tictactoe", weight=2, config={"num_groups": 4}),
        EnvironmentEntry(env="reverse_text", weight=1, examples=3),
        EnvironmentEntry(env="rg/leg_counting", weight=1),
    ]
    rows = training_rows(entries, 40, 8, seed=1)
    batches = [rows[start : start + 8] for start in range(0, 40, 8)]
    for batch in batches:  # weights 2:1:1 of 8 groups, exactly; each env's rows together
        names = [name for name, _ in batch]
        assert names == ["tictactoe"] * 4 + ["reverse_text"] * 2 + ["rg/leg_counting"] * 2
        # tictactoe's 4 strata (example i: stratum i mod 4), one group each.
        assert sorted(example % 4 for name, example in batch if name == "tictactoe") == [0, 1, 2, 3]
    examples = {name: [e for n, e in rows if n == name] for name, _ in rows}
    assert sorted(examples["tictactoe"]) == list(range(20))  # a new example for every group
    assert sorted(examples["rg/leg_counting"]) == list(range(10))
    assert sorted(examples["reverse_text"]) == sorted([0, 1, 2] * 3 + [0])  # 3, cycled
    assert training_rows(entries, 40, 8, seed=1) == rows  # the seed decides
    # Shares that are not whole: the rest drawn by weight, the shares kept on average.
    drawn = training_rows([EnvironmentEntry(env="a"), EnvironmentEntry(env="b", weight=2)],
                          3000, 4, seed=0)  # fmt: skip
    assert abs(sum(name == "a" for name, _ in drawn) / 3000 - 1 / 3) < 0.02
    for start in range(0, 3000, 4):
        assert sorted(name for name, _ in drawn[start : start + 4]) in (
            ["a", "b", "b", "b"], ["a", "a", "b", "b"]
        )  # fmt: skip


def test_the_config_checks_a_mixture_whole() -> None:
    envs = [{"env": "tictactoe"}, {"env": "reverse_text", "weight": 3}]
    run = GRPORunConfig(envs=envs)
    assert [(e.name, e.weight, e.split) for e in run.entries()] == [
        ("tictactoe", 1.0, "train"), ("reverse_text", 3.0, "train")
    ]  # fmt: skip
    refusals = {
        "env_config, split and [[envs]] both name": {"env_config": {}, "split": "eval"},
        "names tictactoe more than once": {"envs": [*envs, {"env": "tictactoe"}]},
        "set reward_weights in each entry": {"grpo": {"reward_weights": [1.0]}},
        "[[envs]] 'tictactoe': config.num_groups (4) must equal the groups it gets in "
        "each batch (2 of": {
            "envs": [{"env": "tictactoe", "config": {"num_groups": 4}}, envs[1]],
            "grpo": {"num_generations": 2, "generation_batch_size": 16},
        },
        "eval_examples is 0": {"grpo": {"eval_strategy": "steps"}},
    }
    for message, options in refusals.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            GRPORunConfig.model_validate({"envs": envs, **options})
    with pytest.raises(ValueError, match="reward_weights is for rollout"):
        GRPORunConfig(rollout="environment_factory",
                      envs=[{"env": "sql", "reward_weights": {"correct": 2.0}}])  # fmt: skip
    two_names = GRPORunConfig(envs=[{"env": "tictactoe"}, {"env": "tictactoe", "name": "hard"}])
    assert [e.name for e in two_names.entries()] == ["tictactoe", "hard"]


def test_one_grpo_run_trains_and_evaluates_on_several_environments(
    service: ServiceProcess, tmp_path: Path
) -> None:
    """Tic-tac-toe, reverse_text and a reasoning-gym dataset in one run: each batch holds
    a group of each, each has its own reward functions, weights, curves and evaluation."""
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    run = GRPORunConfig(
        model="tiny", url=service.url, examples=6, run="grpo-mixed",
        output_dir=str(tmp_path / "out"), max_completion_length=24,
        sampling={"max_tokens_per_turn": 12},
        envs=[
            {"env": "tictactoe", "metric_rewards": {"invalid_moves": -0.25}, "eval_examples": 1},
            {"env": "reverse_text", "reward_weights": {"format": 0.5}, "eval_examples": 1},
            {"env": "rg/leg_counting"},
        ],
        grpo={
            "num_generations": 2, "generation_batch_size": 6, "per_device_train_batch_size": 6,
            "max_steps": 2, "logging_steps": 1, "eval_steps": 2, "num_generations_eval": 2,
            "per_device_eval_batch_size": 4, "save_strategy": "no",
        },
    )  # fmt: skip
    model, tokenizer = load("tiny")
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        trainer.train()
        trained = archived(client, "grpo-mixed", 12).episodes
        evaluated = archived(client, "grpo-mixed-eval", 4).episodes

    assert [f.__name__ for f in trainer.reward_funcs] == [
        "tictactoe/win", "tictactoe/format", "tictactoe/invalid_move", "tictactoe/invalid_moves",
        "reverse_text/lcs", "reverse_text/format",
        "rg/leg_counting/correct", "rg/leg_counting/format",
    ]  # fmt: skip
    assert [float(w) for w in trainer.reward_weights] == pytest.approx(
        [1.0, 0.2, 1.0, -0.25, 1.0, 0.5, 1.0, 0.1]
    )
    # 2 steps x 3 groups of 2: each environment's groups are its own examples 0 and 1.
    by_env: dict[str, list[tuple[int, str]]] = {}
    for episode in trained:
        by_env.setdefault(episode.env, []).append((episode.example, episode.group))
    assert sorted(by_env) == ["reverse_text", "rg/leg_counting", "tictactoe"]
    for played in by_env.values():
        assert sorted(example for example, _ in played) == [0, 0, 1, 1]
        assert len({group for _, group in played}) == 2  # a group is one env's
    # Each environment has its curves: its components' rewards and its own mean reward.
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(steps) == 2
    for step in steps:
        for name in ("tictactoe", "reverse_text", "rg/leg_counting"):
            assert f"wander/{name}/reward" in step
        assert 0.0 <= step["rewards/reverse_text/lcs/mean"] <= 1.0
    # The evaluation played the entries that ask for it, each on its eval split.
    [evaluation] = [entry for entry in trainer.state.log_history if "eval_reward" in entry]
    assert 0.0 <= evaluation["eval_rewards/reverse_text/lcs/mean"] <= 1.0
    assert sorted((e.env, e.split, e.example) for e in evaluated) == [
        ("reverse_text", "eval", 0), ("reverse_text", "eval", 0),
        ("tictactoe", "eval", 0), ("tictactoe", "eval", 0),
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["stage1", "stage2"])
def test_the_talks_configs_load(name: str) -> None:
    run = load_config(Path(__file__).parents[1] / "trainer" / "configs" / f"{name}.toml")
    assert run.grpo["loss_type"] == "cispo" and run.peft == {
        "r": 8, "lora_alpha": 16, "target_modules": "all-linear"
    }  # fmt: skip
    assert run.grpo["generation_batch_size"] == 256 and run.grpo["num_generations"] == 8
    assert run.env_config["num_groups"] == 32
    # Generation on a vLLM server, which TRL would look for on Wander's port otherwise.
    assert (run.grpo["use_vllm"], run.grpo["vllm_mode"]) == (True, "server")
    vllm, wander = httpx.URL(run.grpo["vllm_server_base_url"]), httpx.URL(run.url)
    assert (vllm.host, vllm.port, wander.port) == ("127.0.0.1", 8001, 8000)


def test_the_mixture_config_loads() -> None:
    run = load_config(Path(__file__).parents[1] / "trainer" / "configs" / "mixture.toml")
    assert [(e.name, e.weight, e.eval_examples) for e in run.entries()] == [
        ("tictactoe", 2.0, 16), ("reverse_text", 1.0, 8), ("rg/leg_counting", 1.0, 8)
    ]  # fmt: skip
    rows = training_rows(run.entries(), run.examples, 256 // 8)
    first = [name for name, _ in rows[:32]]
    assert (first.count("tictactoe"), first.count("reverse_text")) == (16, 8)
    assert trl_args(run.model_copy(update={"grpo": {**run.grpo, "bf16": False}})).eval_steps == 25


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


SCRIPTED_QUERY = "SELECT count(*) FROM customers"


def scripted_generation(tokenizer: Any) -> Callable[..., tuple[list[list[int]], None]]:
    """A stand-in for TRL's ``_generate_single_turn`` (an untrained model rarely writes a
    tool call): a first turn calls ``run_sql``; a turn after a tool reply answers, in
    ``<answer>`` tags for the even rollouts of the call and bare for the odd ones, so the
    members of a GRPO group score differently."""
    call = json.dumps({"name": "run_sql", "arguments": {"query": SCRIPTED_QUERY}})

    def generate(
        prompt_ids: list[list[int]], images: Any, fields: Any, num_generations: int, **_: Any
    ) -> tuple[list[list[int]], None]:
        def reply(index: int, ids: list[int]) -> str:
            if "<tool_response>" not in tokenizer.decode(ids):
                return f"<tool_call>\n{call}\n</tool_call>"
            return "<answer>7</answer>" if index % 2 == 0 else "7"

        texts = [reply(index, ids) + "<|im_end|>" for index, ids in enumerate(prompt_ids)]
        return [tokenizer.encode(text, add_special_tokens=False) for text in texts], None

    return generate


def test_grpo_steps_through_trls_tool_loop(service: ServiceProcess, tmp_path: Path) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    run = GRPORunConfig(
        model="tiny", rollout="environment_factory", url=service.url, env="sql", examples=4,
        run="trl-tools", output_dir=str(tmp_path / "out"), max_completion_length=256,
        grpo={
            "num_generations": 2, "generation_batch_size": 4, "per_device_train_batch_size": 4,
            "max_steps": 2, "learning_rate": 1e-2, "logging_steps": 1, "use_cpu": True,
            "save_strategy": "no", "max_tool_calling_iterations": 2,
        },
    )  # fmt: skip
    model, tokenizer = load("tiny", tools=True)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        assert [tool.__name__ for tool in trainer.tools] == [
            "describe_table", "list_tables", "run_sql"
        ]  # fmt: skip
        trainer._generate_single_turn = scripted_generation(tokenizer)
        [score] = trainer.reward_funcs
        seen: list[dict[str, Any]] = []

        def spy(**fields: Any) -> list[float | None]:
            episodes: list[str] = []
            rewards = score(**{**fields, "log_extra": lambda _, values: episodes.extend(values)})
            seen.append({"prompts": fields["prompts"], "completions": fields["completions"],
                         "episodes": episodes, "rewards": rewards})  # fmt: skip
            return rewards

        trainer.reward_funcs = [spy]
        trainer.train()
        for _ in range(50):  # the archive writes behind
            if any(r.run == "trl-tools" and r.episodes == 8 for r in client.runs().runs):
                break
            time.sleep(0.1)
        archived = {e.id: e for e in client.episodes("trl-tools", limit=100).episodes}

    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert any(not (before[n] == p).all() for n, p in model.named_parameters())
    logged = trainer.state.log_history[0]
    assert {"wander/correct", "wander/format", "wander/efficiency"} <= logged.keys()

    # Every rollout is an archived episode of the run; its reward is Wander's score total.
    rollouts = [
        rollout
        for batch in seen
        for rollout in zip(
            batch["episodes"], batch["prompts"], batch["completions"], batch["rewards"], strict=True
        )
    ]
    assert len(rollouts) == 8 and set(archived) == {rollout[0] for rollout in rollouts}
    for episode_id, prompt, completion, reward in rollouts:
        record = archived[episode_id]
        assert record.status == "done" and reward == record.score.total
        # The episode's opening was the prompt; the scripted call reached Wander as one
        # step, and its reply reached the model.
        system, question, call, reply, answer = record.messages
        assert prompt == [{"role": "user", "content": f"{system.content}\n\n{question.content}"}]
        [tool_call] = call.tool_calls or []
        assert tool_call.function.name == "run_sql"
        assert json.loads(tool_call.function.arguments) == {"query": SCRIPTED_QUERY}
        assert reply.role == "tool" and reply.content.startswith("count(*)")
        assert [m["content"] for m in completion if m["role"] == "tool"] == [reply.content]
        assert answer.content == completion[-1]["content"]
        assert answer.content in ("<answer>7</answer>", "7")
        assert record.score.metrics["tool_calls"] == 1
    assert len({rollout[-1] for rollout in rollouts}) > 1  # formatted and bare answers differ

    # The members of a GRPO group play the same example from the same seed.
    starts: dict[int, set[int]] = {}
    for record in archived.values():
        starts.setdefault(record.example, set()).add(record.seed)
    assert sorted(starts) == [0, 1, 2, 3] and all(len(seeds) == 1 for seeds in starts.values())
    assert sorted(e.example for e in archived.values()) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_tool_loop_run_mixes_environments_through_trls_dict_factory(
    service: ServiceProcess, tmp_path: Path
) -> None:
    """Two entries of a tool environment (one cut to a single turn), each a factory of
    TRL's dict ``environment_factory``, each scored by a reward function of its own."""
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    run = GRPORunConfig(
        model="tiny", rollout="environment_factory", url=service.url, examples=2,
        run="trl-mixed", output_dir=str(tmp_path / "out"), max_completion_length=256,
        envs=[{"env": "sql", "name": "sql-long"},
              {"env": "sql", "name": "sql-short", "config": {"max_turns": 1}}],
        grpo={
            "num_generations": 2, "generation_batch_size": 4, "per_device_train_batch_size": 4,
            "max_steps": 1, "logging_steps": 1, "use_cpu": True, "save_strategy": "no",
            "max_tool_calling_iterations": 2,
        },
    )  # fmt: skip
    model, tokenizer = load("tiny", tools=True)
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        assert list(trainer.environment_factories) == ["sql-long", "sql-short"]
        assert [f.__name__ for f in trainer.reward_funcs] == ["sql-long", "sql-short"]
        trainer._generate_single_turn = scripted_generation(tokenizer)
        trainer.train()
        played = archived(client, "trl-mixed", 4).episodes

    # The long entry's episodes took the call and the answer; the short one's ended at
    # its one turn, the call, and took no answer.
    ends = sorted((e.config["max_turns"], e.turn, e.score.metrics["answered"])
                  for e in played if e.score is not None)  # fmt: skip
    assert ends == [(1, 1, False), (1, 1, False), (12, 2, True), (12, 2, True)]
    [logged] = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert {"rewards/sql-long/mean", "rewards/sql-short/mean"} <= logged.keys()
    assert {"wander/sql-long/correct", "wander/sql-short/correct"} <= logged.keys()


def test_a_tool_environment_plays_its_rollout_as_one_wander_episode(
    service: ServiceProcess,
) -> None:
    with WanderClient(service.url) as client:
        factory = tool_environment(client, "sql", config={"max_turns": 2}, run="trl-env")
        environment = factory()
        opening = environment.reset(example=3, seed=42, prompt=[{"role": "user", "content": ""}])
        tables = environment.list_tables()
        last = environment.run_sql(query="SELECT 1 AS one")  # the second turn: the last
        with pytest.raises(RuntimeError, match="the episode has ended"):
            environment.list_tables()
        episodes: list[str] = []
        answer = [{"role": "assistant", "content": "<answer>1</answer>"}]
        [reward] = wander_score(
            completions=[answer], environments=[environment],
            log_extra=lambda _, values: episodes.extend(values),
        )  # fmt: skip
        record = client.episode(episodes[0])

    assert (record.example, record.seed, record.run) == (3, 42, "trl-env")
    system, question, *played = record.messages
    assert opening == f"{system.content}\n\n{question.content}"
    assert [(m.role, m.tool_calls[0].function.name if m.tool_calls else None) for m in played] == [
        ("assistant", "list_tables"), ("tool", None),
        ("assistant", "run_sql"), ("tool", None), ("user", None),
    ]  # fmt: skip
    assert tables == played[1].content and "customers" in tables.splitlines()
    assert last == f"{played[3].content}\n\n{played[4].content}"
    assert "The limit of 2 turns was reached" in last
    # Ended by its turn limit, the episode takes no final answer; the reward is its score.
    assert record.status == "done" and record.turn == 2
    assert reward == record.score.total and record.score.metrics["answered"] is False


def test_a_tool_environment_class_plays_in_a_worker_process(service: ServiceProcess) -> None:
    """TRL's ``AsyncGRPOTrainer`` pickles its ``environment_factory`` into a worker
    process: the class made for the service pickles as the call that makes it again,
    and plays there with the same service, options and tools."""
    with WanderClient(service.url) as client:
        factory = tool_environment(client, "sql", config={"max_turns": 3}, run="trl-pickled")
        code = ("import json, pickle, sys; from tests.helpers import played_elsewhere; "
                "print(json.dumps(played_elsewhere(pickle.load(sys.stdin.buffer))))")  # fmt: skip
        worker = subprocess.run(
            [sys.executable, "-c", code], input=pickle.dumps(factory), capture_output=True,
            cwd=Path(__file__).parents[1], timeout=120,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr.decode()[-2000:]
        name, tables, episode = json.loads(worker.stdout)
        record = client.episode(episode)
        client.delete(episode)
    assert name == "SqlEnvironment" and "customers" in tables.splitlines()
    assert (record.run, record.config["max_turns"], record.turn) == ("trl-pickled", 3, 1)


def test_wander_score_ends_every_rollout(service: ServiceProcess) -> None:
    with WanderClient(service.url) as client:
        factory = tool_environment(client, "sql", run="trl-env")
        cut_short, answered = factory(), factory()
        cut_short.reset(example=0)
        reply = cut_short.run_sql(query="SELECT count(*) FROM products")
        answered.reset(example=1)
        episodes: list[str] = []
        rewards = wander_score(
            completions=[
                [{"role": "assistant", "content": ""}, {"role": "tool", "content": reply}],
                [{"role": "assistant", "content": "<answer>\0</answer>"}],
            ],
            environments=[cut_short, answered],
            log_extra=lambda _, values: episodes.extend(values),
        )
        records = [client.episode(episode) for episode in episodes]
        with pytest.raises(ValueError, match="tictactoe is a multi_turn environment without tools"):
            tool_environment(client, "tictactoe")
    # TRL cut the rollout short (its last message a tool reply): aborted, scored as it stood.
    assert (records[0].status, records[0].turn) == ("aborted", 1)
    # The answer is the last step; the NUL an untrained model may sample is replaced.
    assert (records[1].status, records[1].turn) == ("done", 1)
    assert records[1].messages[-1].content == "<answer>\ufffd</answer>"
    assert rewards == [record.score.total for record in records]


def test_wander_score_finishes_a_batchs_episodes_at_once() -> None:
    """Each finish waits for all four to have started: they pass only if they overlap
    (one by one, the first would wait for the others for ever)."""
    started = threading.Barrier(4, timeout=10)

    class Waiting(WanderToolEnvironment):
        def _finish(self, last: Mapping[str, Any]) -> Any:
            started.wait()
            return Score(episode_id=str(last["content"]), done=True, total=1.0, components={},
                         weights={}, metrics={})  # fmt: skip

    done = [[{"role": "assistant", "content": f"e{i}"}] for i in range(4)]
    rewards = wander_score(completions=done, environments=[Waiting() for _ in done])
    assert rewards == [1.0] * 4


def test_tool_methods_give_the_tools_schema_back() -> None:
    from transformers.utils import get_json_schema

    parameters = {
        "type": "object",
        "properties": {
            "table": {"type": "string", "description": "Table\n  name."},
            "limit": {"type": "integer", "description": "Rows."},
            "order": {"type": "string", "enum": ["asc", "desc"], "description": "Order."},
            "columns": {"type": "array", "items": {"type": "string"}, "description": "Columns."},
        },
        "required": ["table", "order"],
    }
    tool = {"type": "function", "function": {"name": "peek", "description": "Look at a table.",
                                              "parameters": parameters}}  # fmt: skip
    method = tool_method(tool)
    owner = type("Owner", (), {"peek": method, "_call_tool": lambda self, *call: call})
    properties = {**parameters["properties"], "table": {"type": "string",
                                                       "description": "Table name."}}  # fmt: skip
    assert get_json_schema(owner().peek) == {
        "type": "function",
        "function": {"name": "peek", "description": "Look at a table.",
                     "parameters": {**parameters, "properties": properties}},
    }  # fmt: skip
    # The call goes to the environment as the model wrote it, unknown arguments included.
    assert owner().peek(table="t", extra=1) == ("peek", {"table": "t", "extra": 1})
    for name in ("reset", "get_reward", "_hidden", "not-python"):
        with pytest.raises(ValueError, match=repr(name)):
            tool_method({"type": "function", "function": {"name": name}})


def test_the_tool_loop_config() -> None:
    run = load_config(Path(__file__).parents[1] / "trainer" / "configs" / "sql_tools.toml")
    assert (run.rollout, run.env) == ("environment_factory", "sql")
    with pytest.raises(ValueError, match="max_tokens_per_turn is for rollout"):
        GRPORunConfig(rollout="environment_factory", sampling={"max_tokens_per_turn": 64})


def test_wander_train_grpo_through_the_tool_loop(service: ServiceProcess, tmp_path: Path) -> None:
    """The config switch, end to end on the command line, with the untrained tiny model
    (its rollouts end without a tool call: each is one final answer)."""
    config = tmp_path / "sql.toml"
    config.write_text(f"""
model = "tiny"
rollout = "environment_factory"
env = "sql"
examples = 2
run = "trl-cli"
output_dir = "{tmp_path / "out"}"
max_completion_length = 16
[grpo]
num_generations = 2
generation_batch_size = 4
per_device_train_batch_size = 4
max_steps = 1
save_strategy = "no"
""")
    runner = CliRunner(env={"COLUMNS": "200"})  # usage errors are boxed; no wrapping inside
    command = ["train", "grpo", "--config", str(config), "--url", service.url]
    trained = runner.invoke(cli, command)
    assert trained.exit_code == 0, trained.output
    with WanderClient(service.url) as client:
        for _ in range(50):  # the archive writes behind
            if any(r.run == "trl-cli" and r.episodes == 4 for r in client.runs().runs):
                break
            time.sleep(0.1)
        page = client.episodes("trl-cli", limit=10)
    assert page.total == 4 and {e.status for e in page.episodes} == {"done"}
    config.write_text(config.read_text().replace('"sql"', '"tictactoe"'))
    refused = runner.invoke(cli, command)
    assert refused.exit_code == 2 and "without tools" in refused.output


def test_reward_weights_are_the_configs_or_the_environments(
    service: ServiceProcess, tmp_path: Path
) -> None:
    def weights(
        grpo: dict[str, Any], metric_rewards: dict[str, float] | None = None
    ) -> list[float]:
        run = GRPORunConfig(url=service.url, output_dir=str(tmp_path), grpo={
            "num_generations": 2, "generation_batch_size": 4, "per_device_train_batch_size": 4,
            **grpo,
        }, metric_rewards=metric_rewards or {})  # fmt: skip
        model, tokenizer = load("tiny")
        with WanderClient(service.url) as client:
            trainer = build_trainer(run, client, model, tokenizer)
        assert any(isinstance(c, FiniteGradients) for c in trainer.callback_handler.callbacks)
        assert [f.__name__ for f in trainer.reward_funcs] == [  # TRL logs rewards/<name>/mean
            "win", "format", "invalid_move", *(metric_rewards or {})
        ]  # fmt: skip
        return [float(w) for w in trainer.reward_weights]  # what TRL weighs the rewards by

    assert weights({}) == pytest.approx([1.0, 0.2, 1.0])  # tictactoe's: win, format, invalid_move
    assert weights({"reward_weights": [1.0, 0.0, 3.0]}) == [1.0, 0.0, 3.0]
    with pytest.raises(ValueError, match=r"2 weights for 3 reward functions \(win, format, inv"):
        weights({"reward_weights": [1.0, 0.5]})
    # A rewarded score metric comes after the components, with its own weight.
    metric = {"invalid_moves": -0.25}
    assert weights({}, metric) == pytest.approx([1.0, 0.2, 1.0, -0.25])
    assert weights({"reward_weights": [1.0, 0.0, 5.0, -0.5]}, metric) == [1.0, 0.0, 5.0, -0.5]
    with pytest.raises(ValueError, match="3 weights for 4 reward functions"):
        weights({"reward_weights": [1.0, 0.2, 5.0]}, metric)
    with pytest.raises(ValueError, match="names invalid_move, which tictactoe's score comp"):
        weights({}, {"invalid_move": -1.0})


def train_command(
    config: Path, url: str, tmp_path: Path, max_steps: int, model: str = "tiny",
    env: str = "digits", **grpo: Any,
) -> list[str]:  # fmt: skip
    """``wander train grpo`` on ``env`` (the digits environment unless it names another),
    with the tiny model unless ``model`` names another."""
    options = "\n".join(f"{key} = {json.dumps(value)}" for key, value in grpo.items())
    config.write_text(f"""
model = "{model}"
env = "{env}"
examples = 8
run = "{config.stem}"
output_dir = "{tmp_path / "out"}"
max_completion_length = 64
[sampling]
max_tokens_per_turn = 8
[grpo]
num_generations = 4
generation_batch_size = 8
per_device_train_batch_size = 8
max_steps = {max_steps}
logging_steps = 1
{options}
""")
    return ["train", "grpo", "--config", str(config), "--url", url]


def test_wander_train_grpo_resumes_from_its_latest_checkpoint(
    service: ServiceProcess, tmp_path: Path
) -> None:
    config = tmp_path / "resumed.toml"
    runner = CliRunner(env={"COLUMNS": "200"})
    first = runner.invoke(cli, train_command(config, service.url, tmp_path, 2, save_steps=1))
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (tmp_path / "out").glob("checkpoint-*")) == [
        "checkpoint-1", "checkpoint-2"
    ]  # fmt: skip
    with WanderClient(service.url) as client:
        assert archived(client, "resumed", 16).total == 16  # 2 steps of 8 episodes
    command = train_command(config, service.url, tmp_path, 3, save_steps=1)
    resumed = runner.invoke(cli, [*command, "--resume", "latest"])
    assert resumed.exit_code == 0, resumed.output
    state = json.loads((tmp_path / "out" / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    # Steps 1 and 2 come back from the checkpoint; only step 3 played new episodes.
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3]
    with WanderClient(service.url) as client:
        assert archived(client, "resumed", 24).total == 24


def test_grpo_evaluates_on_the_eval_split_while_it_trains(
    service: ServiceProcess, tmp_path: Path
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    evaluation = {"eval_steps": 1, "num_generations_eval": 2, "per_device_eval_batch_size": 4}
    run = digits_run(service.url, tmp_path, "grpo-eval", {"max_steps": 2, **evaluation},
                     eval_examples=3)  # fmt: skip
    model, tokenizer = load("tiny")
    with WanderClient(service.url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        trainer.train()
        evaluated = archived(client, "grpo-eval-eval", 12).episodes
        trained = archived(client, "grpo-eval", 16).episodes

    evaluations = [entry for entry in trainer.state.log_history if "eval_reward" in entry]
    assert [entry["step"] for entry in evaluations] == [1, 2]
    for entry in evaluations:
        assert 0.0 <= entry["eval_rewards/digits/mean"] <= 1.0
    # Each evaluation played the 3 eval examples twice, on the eval split, under a run
    # label of its own; training stayed on the train split.
    assert {e.split for e in evaluated} == {"eval"}
    assert sorted(e.example for e in evaluated) == sorted([0, 1, 2] * 4)
    assert {e.split for e in trained} == {"train"} and len(trained) == 16


class Logits(TrainerCallback):
    """The policy's logits on one fixed input when training begins and when it ends."""

    def __init__(self, tokenizer: Any) -> None:
        self.ids = torch.tensor([tokenizer.encode("Your move. <think> the centre </think>")])
        self.at: dict[str, torch.Tensor] = {}

    def _record(self, moment: str, model: Any) -> None:
        training = model.training
        model.eval()
        with torch.no_grad():
            self.at[moment] = model(input_ids=self.ids.to(model.device)).logits.float().cpu()
        model.train(training)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record("begin", kwargs["model"])

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record("end", kwargs["model"])


def test_stage_2_starts_where_stage_1_ended(
    service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two LoRA stages chained as the talk's configs chain them (stage 2's `model` is
    stage 1's `output_dir`), from a model folder as a hub model would be: stage 2's
    first logits are stage 1's last, and so are those of a run started from one of
    stage 1's checkpoints (TRL saves those as the adapter alone)."""
    base = tmp_path / "base"
    model, tokenizer = load("tiny")
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    stages: list[Logits] = []

    def recording(*args: Any) -> Any:
        trainer = build_trainer(*args)
        stages.append(Logits(tokenizer))
        trainer.add_callback(stages[-1])
        return trainer

    monkeypatch.setattr("wander.trainer.grpo.build_trainer", recording)
    runner = CliRunner(env={"COLUMNS": "200"})

    def stage(name: str, start: Path, steps: int) -> Logits:
        config = tmp_path / f"{name}.toml"
        command = train_command(
            config, service.url, tmp_path / name, steps, str(start),
            learning_rate=0.05, save_steps=steps,
        )  # fmt: skip
        with config.open("a") as file:
            file.write('[peft]\nr = 8\nlora_alpha = 16\ntarget_modules = "all-linear"\n')
        done = runner.invoke(cli, command)
        assert done.exit_code == 0, done.output
        return stages[-1]

    first = stage("stage1", base, 2)
    stage1 = tmp_path / "stage1" / "out"
    # A whole model, as `vllm serve` wants one: no adapter left to apply.
    assert (stage1 / "config.json").is_file() and (stage1 / "model.safetensors").is_file()
    assert not (stage1 / "adapter_config.json").exists()
    assert not torch.allclose(first.at["begin"], first.at["end"], atol=1e-3)  # it learned

    second = stage("stage2", stage1, 1)
    torch.testing.assert_close(second.at["begin"], first.at["end"], atol=1e-5, rtol=1e-4)
    checkpoint = stage1 / "checkpoint-2"
    assert (checkpoint / "adapter_config.json").is_file()
    resumed = stage("from-checkpoint", checkpoint, 1)
    torch.testing.assert_close(resumed.at["begin"], first.at["end"], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("backend", ["vllm", "transformers", "async"])
def test_two_processes_each_play_their_part_of_the_batch(
    service: ServiceProcess, tmp_path: Path, backend: str
) -> None:
    """`accelerate launch` with 2 CPU processes (gloo), each process playing its own GRPO
    group, and the LoRA run's merged weights saved once, whole (tests/launched_grpo.py).
    vllm: on a stand-in for a vLLM server, whose client TRL keeps on the main process
    only. transformers: the second process's episodes fail at their first step, yet
    it samples as often as the first (under ZeRO-3 / FSDP each forward pass is a
    collective). async: the same, asynchronous (two steps, the second batch played
    ahead): the second process samples for its own episodes only, never waiting for
    the first's."""
    steps = 2 if backend == "async" else 1
    config, out = tmp_path / "two.toml", tmp_path / "out"
    config.write_text(f"""
max_staleness = {steps - 1}
model = "tiny"
env = "digits"
examples = 4
run = "two-{backend}"
output_dir = "{out}"
max_completion_length = 64
max_failure_rate = 0.5
[sampling]
max_tokens_per_turn = 8
[grpo]
num_generations = 4
generation_batch_size = 8
per_device_train_batch_size = 4
max_steps = {steps}
learning_rate = 0.01
logging_steps = 1
save_strategy = "no"
[peft]
r = 8
lora_alpha = 16
target_modules = "all-linear"
""")
    launch = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()),
        "-m", "tests.launched_grpo", "train", "grpo", "--config", str(config), "--url", service.url,
    ]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "WANDER_TEST_RECORD": str(tmp_path),
           "WANDER_TEST_BACKEND": "vllm" if backend == "vllm" else "transformers"}  # fmt: skip
    done = subprocess.run(launch, cwd=Path(__file__).parents[1], env=env, capture_output=True,
                          text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    main, other = (json.loads((tmp_path / f"rank{i}.json").read_text()) for i in (0, 1))

    # Each process played 4 episodes of its own a step: one GRPO group (one example,
    # one seed), each process another; the archive holds all 8 of each step.
    assert len(main["episodes"]) == len(other["episodes"]) == 4 * steps
    with WanderClient(service.url) as client:
        played = archived(client, f"two-{backend}", 8 * steps, limit=20)
        records = {e.id: e for e in played.episodes}
    assert played.total == 8 * steps
    assert set(records) == {*main["episodes"], *other["episodes"]}
    starts = [{(records[e].example, records[e].seed) for e in p["episodes"]} for p in (main, other)]
    assert [len(start) for start in starts] == [steps, steps] and not starts[0] & starts[1]
    for record in (main, other):
        logged = [entry for entry in record["log_history"] if "loss" in entry]
        assert len(logged) == steps and all(math.isfinite(entry["loss"]) for entry in logged)
    if backend == "vllm":
        # One request a turn (2 turns) for both processes' 8 prompts, from the main process.
        assert main["requests"] == [8, 8] and other["requests"] is None
    elif backend == "transformers":
        # Two turns for the first process's 4 episodes; the second's ended at the first
        # (failed: 4 of the batch's 8, within max_failure_rate), so its second is empty.
        assert main["generate_calls"] == [4, 4] and other["generate_calls"] == [4, 0]
        assert "4 of 8 episodes of the batch failed" in done.stderr
    else:
        # Asynchronous: each process's turns are its own episodes' (two batches of two
        # turns, the second's played ahead), and the second's first batch ended after
        # one: it did not go on sampling for none. Failures judged on the whole batch.
        assert main["generate_calls"] == [4, 4, 4, 4] and other["generate_calls"] == [4, 4, 4]
        assert "4 of 8 episodes of the batch failed" in done.stderr
        assert [entry["wander/staleness"] for entry in logged] == [0.0, 1.0]

    # The stage's folder holds a whole model (the adapter merged), which loads, and
    # the step changed it.
    assert not (out / "adapter_config.json").exists()
    saved = AutoModelForCausalLM.from_pretrained(out)
    start, tokenizer = load("tiny")
    ids = torch.tensor([tokenizer.encode("Your move. <think>")])
    with torch.no_grad():
        assert not torch.allclose(saved(input_ids=ids).logits, start(input_ids=ids).logits)
