"""The training configuration is checked whole, and says which value wins, before
any model loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from wander.cli import app as cli
from wander.trainer.config import GRPORunConfig
from wander.trainer.grpo import trl_args
from wander.trainer.rollout import episode_groups

CONFIG = """
model = "tiny"
examples = 8
output_dir = "{output}"
[grpo]
num_generations = 4
generation_batch_size = 8
per_device_train_batch_size = 8
"""


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("num_generationz = 4", "'num_generationz' is not an option of TRL's GRPOConfig"),
        ("num_generationz = 4", "(did you mean 'num_generations'?)"),
        ("generation_batch_size = 6", "generation_batch_size (6) must be divisible by"),
        ('eval_strategy = "steps"', "eval_examples is 0"),
        ("use_vllm = true", 'set grpo.vllm_mode = "server"'),
        ('use_vllm = true\nvllm_mode = "colocate"', 'set grpo.vllm_mode = "server"'),
    ],
)
def test_a_bad_grpo_option_is_a_config_error_before_the_model_loads(
    option: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[str] = []
    monkeypatch.setattr("wander.trainer.models.load", lambda model, **_: loaded.append(model))
    config = tmp_path / "run.toml"
    text = CONFIG.format(output=tmp_path / "out").replace("generation_batch_size = 8\n", "")
    config.write_text(f"{text}{option}\n")
    runner = CliRunner(env={"COLUMNS": "300"})  # usage errors are boxed; no wrapping inside
    result = runner.invoke(cli, ["train", "grpo", "--config", str(config)])
    assert result.exit_code == 2 and "--config" in result.output, result.output
    assert message in result.output and loaded == []


def test_resume_names_a_checkpoint_that_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[str] = []
    monkeypatch.setattr("wander.trainer.models.load", lambda model, **_: loaded.append(model))
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(output=tmp_path / "out"))
    runner = CliRunner(env={"COLUMNS": "300"})
    for resume, message in [("latest", "holds no checkpoint yet"),
                            (str(tmp_path), "is not a checkpoint folder")]:  # fmt: skip
        result = runner.invoke(cli, ["train", "grpo", "--config", str(config), "--resume", resume])
        assert result.exit_code == 2 and "--resume" in result.output and message in result.output
    assert loaded == []


def test_temperature_and_top_p_have_one_value() -> None:
    # Set in one table, the value is the run's: the rollout samples with it and TRL's
    # loss divides the logits by it.
    for run in (
        GRPORunConfig(grpo={"temperature": 1.25, "top_p": 0.9}),
        GRPORunConfig(sampling={"temperature": 1.25, "top_p": 0.9}),
        GRPORunConfig(sampling={"temperature": 1.25}, grpo={"temperature": 1.25, "top_p": 0.9}),
    ):
        assert (run.sampling.temperature, run.sampling.top_p) == (1.25, 0.9)
        args = trl_args(run)
        assert (args.temperature, args.top_p) == (1.25, 0.9)
    with pytest.raises(ValueError, match=r"grpo.temperature \(1.25\) and sampling.temperature"):
        GRPORunConfig(sampling={"temperature": 1.0}, grpo={"temperature": 1.25})
    with pytest.raises(ValueError, match=r"grpo.top_p \(0.5\) and sampling.top_p \(0.9\)"):
        GRPORunConfig(sampling={"top_p": 0.9}, grpo={"top_p": 0.5})
    with pytest.raises(ValueError, match="greater than 0"):
        GRPORunConfig(grpo={"temperature": 0})


def test_top_k_has_one_value() -> None:
    for run in (GRPORunConfig(grpo={"top_k": 20}), GRPORunConfig(sampling={"top_k": 20})):
        assert run.sampling.top_k == trl_args(run).top_k == 20
    with pytest.raises(ValueError, match=r"grpo.top_k \(5\) and sampling.top_k \(20\)"):
        GRPORunConfig(sampling={"top_k": 20}, grpo={"top_k": 5})


@pytest.mark.parametrize(
    "option",
    [{"repetition_penalty": 1.05}, {"min_p": 0.1}, {"generation_kwargs": {"top_h": 0.5}}],
)
def test_sampling_options_the_rollout_would_not_apply_are_refused(option: dict[str, Any]) -> None:
    [name] = option
    with pytest.raises(ValueError, match=f"grpo.{name} is not applied by Wander's rollout"):
        GRPORunConfig(grpo=option)
    # Neutral values, and TRL's own tool loop (which applies them), are fine.
    GRPORunConfig(grpo={"repetition_penalty": 1.0, "min_p": 0.0, "generation_kwargs": {}})
    GRPORunConfig(rollout="environment_factory", grpo=option)


def test_max_failure_rate_is_a_share_of_the_batch_for_wanders_rollout() -> None:
    assert GRPORunConfig().max_failure_rate == 0.1
    for rate in (-0.1, 1.0):  # 1.0 would train on a batch of failures only
        with pytest.raises(ValueError, match="max_failure_rate"):
            GRPORunConfig(max_failure_rate=rate)
    with pytest.raises(ValueError, match='max_failure_rate is for rollout = "rollout_func"'):
        GRPORunConfig(rollout="environment_factory", max_failure_rate=0.5)


def test_train_from_is_a_marker_for_wanders_rollout() -> None:
    """TRL's tool loop trains every generated token: a marker there would be ignored."""
    assert GRPORunConfig(train_from="<move>").train_from == "<move>"
    with pytest.raises(ValueError, match="train_from"):
        GRPORunConfig(train_from="")  # would mask nothing while seeming to
    with pytest.raises(ValueError, match='train_from is for rollout = "rollout_func"'):
        GRPORunConfig(rollout="environment_factory", train_from="<move>")


def test_metric_rewards_are_for_wanders_rollout() -> None:
    """TRL's tool loop is rewarded with the score total alone: a metric reward there
    would be silently ignored."""
    assert GRPORunConfig(metric_rewards={"invalid_moves": -0.25}).metric_rewards == {
        "invalid_moves": -0.25
    }
    with pytest.raises(ValueError, match='metric_rewards is for rollout = "rollout_func"'):
        GRPORunConfig(rollout="environment_factory", metric_rewards={"invalid_moves": -0.25})


def test_each_group_is_one_example_repeated() -> None:
    assert episode_groups([3, 3, 3, 3, 8, 8, 8, 8], 4) == [(3, 4), (8, 4)]
    assert episode_groups([3] * 8, 4) == [(3, 4), (3, 4)]  # two groups of one example
    # A process holds its part of the batch; a group may straddle two processes.
    assert episode_groups([3, 3, 8, 8, 8, 8], 4, process=1, processes=2) == [(3, 2), (8, 4)]
    assert episode_groups([3, 3, 3, 3, 5, 5], 4, process=0, processes=2) == [(3, 4), (5, 2)]
    with pytest.raises(ValueError, match=r"examples \[3, 8\] share a group of num_generations = 4"):
        episode_groups([3, 3, 3, 8, 8, 8, 8, 8], 4)
    with pytest.raises(ValueError, match="not groups of num_generations = 4"):
        episode_groups([3, 3, 3, 3, 8, 8], 4)
    assert episode_groups([3, 3, 8], None) == [(3, 2), (8, 1)]  # no trainer: runs as they come
