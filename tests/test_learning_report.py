"""The learning benchmark's report (`python -m bench.learning`): what README's learning
table is copied from, so its numbers and intervals must be right."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.learning import exported, keep_as_reference, latest_turns, weights_digest, write
from wander.client import AsyncWanderClient
from wander.client.evaluation import evaluate
from wander.client.policies import MinimaxPolicy
from wander.testing import ServiceProcess


def _row(win: float, invalid: float, draw: float = 0.0) -> dict[str, float]:
    return {"win": win, "draw": draw, "loss": 1 - win - draw, "format": 1.0, "invalid": invalid,
            "errors": 0}  # fmt: skip


def test_the_report_gives_each_target_its_change_and_95_percent_interval(tmp_path: Path) -> None:
    args = {"eval_games": 500, "train_opponent": [0.5, 1.0], "hidden": 128, "layers": 4,
            "warmup_games": 1000, "sft_steps": 400, "grpo_steps": 20, "grpo_prompts": 16,
            "loss_type": "grpo", "grpo_lr": 1e-3, "grpo_warmup_steps": 8, "updates_per_batch": 4,
            "invalid_weight": 5.0, "invalid_move_cost": 0.25, "train_max_turns": 5}  # fmt: skip
    stages = {
        "sft": {"random": _row(0.25, 0.80), "optimal": _row(0.0, 0.70, draw=0.90)},
        "grpo": {"random": _row(0.40, 0.60), "optimal": _row(0.0, 0.70, draw=0.96)},
    }
    curve = [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]
    report = {"args": args, "stages": stages, "curve": curve, "minutes": 30.4,
              "device": "CPU (AVX2 kernels)", "sft_weights": "0123456789abcdef" * 4,
              "sft_device": "CPU (AVX2 kernels)",
              "grpo_weights": "fedcba9876543210" * 4}  # fmt: skip
    write(report, tmp_path)
    table = (tmp_path / "learning.md").read_text()
    assert "from scratch on CPU (AVX2 kernels), 30.4 minutes in all" in table
    assert (
        "is at most 2 points). The SFT model's weights (trained on CPU (AVX2 kernels)): "
        "SHA-256 0123456789abcdef. The GRPO model's: fedcba9876543210.\n"
    ) in table
    assert "against a 50%-100% random opponent with 5 turns at most (grpo loss" in table
    assert "lr 0.001 after 8 warm-up steps, 4 optimizer steps per batch" in table
    assert "invalid-move weight 5, 0.25 per invalid move)." in table
    assert "| grpo | 40% / 0% / 60% | 0% / 96% / 4% | 100% | 60% / 70% |" in table
    # 1.96 * sqrt((.25 * .75 + .4 * .6) / 500) = 5.7 points; 1.96 * sqrt((.16 + .24) / 500) = 5.5
    assert "- wins against the random opponent: +15 (+9 to +21)" in table
    # 1.96 * sqrt((.1 * .9 + .04 * .96) / 500) = 3.1 points: not losing is the optimal's target
    assert "- games lost against the optimal opponent: -6 (-9 to -3)" in table
    assert "- games with an invalid move, against the random opponent: -20 (-26 to -14)" in table
    assert "- games with an invalid move, against the optimal opponent: +0 (-6 to +6)" in table
    assert json.loads((tmp_path / "learning.json").read_text()) == report
    assert (tmp_path / "learning.png").stat().st_size > 0


def test_the_report_says_when_sft_and_grpo_trained_on_single_moves(tmp_path: Path) -> None:
    args = {"eval_games": 500, "train_opponent": [0.5, 1.0], "hidden": 128, "layers": 4,
            "task": "move", "warmup_games": 4000, "warmup_noise": 0.0, "sft_steps": 800,
            "grpo_steps": 30, "grpo_prompts": 16, "loss_type": "grpo", "grpo_lr": 3e-4,
            "updates_per_batch": 4, "invalid_weight": 5.0, "invalid_move_cost": 0.25}  # fmt: skip
    stages = {
        name: {"random": _row(0.5, 0.1), "optimal": _row(0.0, 0.1)} for name in ("sft", "grpo")
    }
    report = {"args": args, "stages": stages, "curve": [{"step": 1, "reward": 0.1}],
              "minutes": 20.0, "device": "CPU"}  # fmt: skip
    write(report, tmp_path)
    table = (tmp_path / "learning.md").read_text()
    # a report from before --warmup-positions and --warmup-ties: uniform moves, random ties
    assert (
        "4000 warm-up moves of tictactoe_move (minimax, random ties, 0% random moves), 800" in table
    )
    assert "30 GRPO steps of 16 x 8 moves of tictactoe_move, the evaluation's games shown " in table
    assert "random opponent" not in table.split("\n")[0]
    assert "invalid-move weight 5). Each stage" in table  # the per-move cost is a game's
    assert "temperature" not in table  # sampled as the evaluation samples
    assert "SHA-256" not in table  # a report from before the digest
    assert "spread" not in table and "unscaled" not in table  # TRL's default, by the group's
    args |= {"warmup_positions": "played", "warmup_ties": "wins", "warmup_opponent": [0.0, 1.0],
             "grpo_temperature": 1.5, "grpo_beta": 0.04, "grpo_train_from": "<move>",
             "grpo_endgames": 0.2, "scale_rewards": "batch",
             "grpo_lr_schedule": "constant", "grpo_warmup_steps": 8,
             "grpo_opponent": [0.0, 0.5]}  # fmt: skip
    write(report, tmp_path)
    table = (tmp_path / "learning.md").read_text()
    assert (
        "4000 warm-up games (minimax, wins ties, 0% random moves, against a 0%-100% random "
        "opponent), each turn as its latest message, 800 SFT steps"
    ) in table
    assert (
        "16 x 8 moves of tictactoe_move, 20% of them a game's last free cell, played against a "
        "0%-50% random opponent, the "
    ) in table
    assert (
        "(grpo loss, lr 0.0003 held after 8 warm-up steps, sampled at temperature 1.5, KL "
        "penalty 0.04 to the SFT model, rewards scaled by the batch's spread, each turn trained "
        "from <move> on, 4 optimizer steps"
    ) in table
    write(report | {"args": args | {"scale_rewards": "none"}}, tmp_path)
    assert "to the SFT model, rewards unscaled, each turn" in (tmp_path / "learning.md").read_text()


def test_the_warm_up_is_exported_once_every_game_it_finished_is_archived(
    live: ServiceProcess,
) -> None:
    """The SFT data is every game the warm-up finished, however late the archive writes
    them, and a game that never comes is an error, not a smaller dataset."""

    async def play() -> None:
        async with AsyncWanderClient(live.url) as wander:
            await evaluate(wander, "tictactoe", MinimaxPolicy(seed=0), examples=6,
                           run="warmup-export", concurrency=1, progress=False)  # fmt: skip

    asyncio.run(play())
    rows = exported(live.url, "warmup-export", 6, status="done")
    assert len(rows) == 6
    assert all(row["messages"][0]["role"] == "system" for row in rows)
    game = rows[0]["messages"]
    turns = latest_turns(game)  # --task move's SFT rows: each turn as LatestTurn shows it
    answers = [k for k, message in enumerate(game) if message["role"] == "assistant"]
    assert [turn["messages"] for turn in turns] == [
        [game[0], game[k - 1], game[k]] for k in answers
    ]
    with pytest.raises(RuntimeError, match="6 of warmup-export's 7 games archived after 1 s"):
        exported(live.url, "warmup-export", 7, timeout=1, status="done")


def test_the_weights_digest_tells_a_model_from_its_copy_and_from_a_changed_one() -> None:
    """What says whether two SFT stages trained the same model."""
    import torch

    from wander.trainer.tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model, copy = build_model(tokenizer), build_model(tokenizer)
    assert weights_digest(model) == weights_digest(copy)
    with torch.no_grad():
        next(copy.parameters()).view(-1)[0] += 1e-6
    assert weights_digest(model) != weights_digest(copy)


def test_a_model_trained_in_the_run_is_the_reference_trl_builds_for_its_kl_penalty(
    tmp_path: Path,
) -> None:
    """TRL's GRPO builds the reference of ``beta`` from the path the policy's config
    names; a model built in the process names none, and would fail there."""
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import get_config_model_id

    from wander.trainer.tiny import build_model, build_tokenizer

    model = build_model(build_tokenizer())
    assert get_config_model_id(model.config) == ""
    keep_as_reference(model, tmp_path / "sft-model")
    reference = AutoModelForCausalLM.from_pretrained(get_config_model_id(model.config))
    assert weights_digest(reference) == weights_digest(model)
    keep_as_reference(model, tmp_path / "again")  # it has a path now: kept as it was
    assert not (tmp_path / "again").exists()
