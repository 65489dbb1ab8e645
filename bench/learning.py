"""The learning benchmark: tiny model from scratch -> SFT warm-up -> GRPO, on the
CPU (or a GPU where there is one), against a live service, each stage evaluated by
the service.

    python -m bench.learning [--task move|game] [--sft-steps 3500] [--grpo-steps 300]
                             [--grpo-prompts 16] [--grpo-lr 1e-4] [--hidden 128]
                             [--layers 4] [--sft-checkpoint DIR] [--results DIR]
                             [--help for the rest]

By default one move at a time: SFT on the distinct turns of 4,000 games of the
minimax baseline that settles its ties for wins, then GRPO on ``tictactoe_move``'s
played positions of games against a stronger opponent (random at most half the time),
sampled hotter (temperature 1.5), as the talk's second stage; every stage evaluated on
whole games of ``tictactoe``, the model shown each turn's latest message
(docs/training.md, "The learning benchmark").

Writes learning.md (the table, and the change from SFT to GRPO of each target of
the recipe, wins and games with an invalid move, with its 95% interval),
learning.json and learning.png (reward components per GRPO step) to
bench/results/. The defaults are sized for under 60 minutes on 2 quiet CPU cores
(bench/README.md, "Learning"). The H100 runs used an earlier games recipe, ``--hidden 256
--layers 8 --grpo-prompts 32 --grpo-steps 15 --grpo-lr 3e-4 --updates-per-batch 1
--invalid-weight 1 --eval-concurrency 512``: about 12 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import kernels
from wander.client import AsyncWanderClient, WanderClient
from wander.client.evaluation import Evaluation, evaluate
from wander.client.models import Message
from wander.client.policies import LatestTurn, MinimaxPolicy
from wander.client.policies.base import latest_turn
from wander.service.archive.migrations import upgrade
from wander.testing import ServiceProcess
from wander.trainer.backends import Sampling, TransformersBackend
from wander.trainer.config import GRPORunConfig
from wander.trainer.grpo import build_trainer as grpo_trainer
from wander.trainer.policy import BackendPolicy
from wander.trainer.sft import build_trainer as sft_trainer
from wander.trainer.tiny import build_model, build_tokenizer

RESULTS = Path(__file__).parent / "results"
TASKS = {"game": "tictactoe", "move": "tictactoe_move"}
"""``--task`` -> the environment SFT and GRPO train on; every stage is evaluated on
whole games of ``tictactoe``."""
OPPONENTS = {
    "random": {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0},
    "optimal": {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0},
}
BASE_EVAL_GAMES = 50
"""The untrained model never writes a move, and its games are the slowest (eight
turns of babble): a few of them show it."""


async def _evaluate(
    url: str, policy: Any, games: int, run: str, concurrency: int
) -> dict[str, dict[str, float]]:
    table = {}
    async with AsyncWanderClient(url) as wander:
        for name, config in OPPONENTS.items():
            result = await evaluate(
                wander, "tictactoe", policy, examples=games, config=config, split="eval",
                run=f"{run}-{name}", concurrency=concurrency, progress=False,
            )  # fmt: skip
            summary = result.summary
            rates = summary.metrics["outcome"].rates  # type: ignore[union-attr]
            table[name] = {
                "win": rates.get("win", 0.0),
                "draw": rates.get("draw", 0.0),
                "loss": rates.get("loss", 0.0),
                "format": summary.components["format"].mean,
                "invalid": summary.metrics["invalid_moves"].nonzero_rate,  # type: ignore[union-attr]
                "errors": summary.errors,
            }
            failed = [r.error for r in result.results if r.error is not None]
            if failed:
                print(f"{run}-{name}: {len(failed)} games failed, the first with {failed[0]}")
    return table


def main() -> None:
    # `kill` then tears down the service this script started, as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task", choices=TASKS, default="move",
        help="what SFT and GRPO train on: whole games of tictactoe, or single moves of "
        "tictactoe_move (a position, scored by the solved game), the model then shown "
        "only each turn's latest message in the evaluation's whole games",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-games", type=int, default=4000,
        help="noisy-minimax games played for SFT (about a second per 100): at 1,000 the model "
        "learnt their words but not to copy the free cells",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-noise", type=float, default=None,
        help="the warm-up baseline's share of random moves (MinimaxPolicy's noise): the "
        "SFT model learns to make them too (default 0.1 for games, of which the lost are "
        "left out; 0 for moves, where each one is an example)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-ties", choices=("random", "wins"), default=None,
        help="how the warm-up baseline chooses among minimax-best moves (MinimaxPolicy's "
        "ties): any at random, or the likeliest to win against a random opponent, which "
        "wins 96%% of such games where random ties win 87%% (default: random for games, "
        "wins for moves)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-positions", choices=("played", "marks"), default="played",
        help="--task move's warm-up positions: those the baseline meets playing whole games "
        "of tictactoe against the warm-up opponent, each turn as the evaluation shows it "
        "(its latest message), or tictactoe_move's, drawn uniformly by number of marks "
        "(--warmup-games then counts moves)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-opponent", type=float, nargs=2, default=None, metavar=("MIN", "MAX"),
        help="the warm-up games' opponent random-move probability range (default: "
        "--train-opponent's for games, 0-1 for moves); from 0, the SFT data holds the "
        "positions a strong opponent makes",
    )  # fmt: skip
    parser.add_argument(
        "--sft-steps", type=int, default=None,
        help="SFT steps of 16 (default 800 for games; 3500 for moves, 16-17 minutes on 2 cores: "
        "the SFT stage on which GRPO met every target in two seeds of three, bench/README.md "
        "\"Training the move alone, and a firmer hold\")",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-steps", type=int, default=None,
        help="generation batches played (default 30 for games; 300 for moves, 24-30 "
        "minutes on 2 cores: 150 left seed 42's model 2.6%% of games with an invalid move against "
        "the optimal opponent)",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-positions", choices=("played", "marks"), default="played",
        help="--task move's GRPO positions (tictactoe_move's positions option): the turns of "
        "a strong player's games, where the SFT model plays, or every position by number of "
        "marks, which undid the SFT model (wins 96%% -> 87%%, not lost against optimal 95%% "
        "-> 76%% in 30 batches)",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-opponent", type=float, nargs=2, default=(0.0, 0.5), metavar=("MIN", "MAX"),
        help="--task move's played positions: the random-move probability range of the "
        "opponent in the games they are drawn from (tictactoe_move's); lower, more of the "
        "positions a strong opponent leads to, as in the talk's second stage (0-0.25); 0-1, "
        "the SFT data's range, lost 6.2%% of games against optimal where 0-0.5 lost 5.0%% "
        "(bench/README.md, \"The talk's second stage, hotter\")",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-endgames", type=float, default=0.0, metavar="SHARE",
        help="--task move's share of GRPO positions that are a played game's last move, the "
        "board's one free cell (tictactoe_move's endgame_share; 3%% of played positions are "
        "such): at 0.2, seed 42 left 2.8%% of 1,000 games against optimal with an invalid move, "
        "1.7%% at 0, on one SFT model (bench/README.md, \"The last free cell\")",
    )  # fmt: skip
    parser.add_argument(
        "--updates-per-batch", type=int, default=4,
        help="optimizer steps per generation batch, each on an equal share of its groups "
        "(TRL's steps_per_generation): more learning from each batch played",
    )  # fmt: skip
    parser.add_argument("--grpo-prompts", type=int, default=16, help="episode groups per step")
    parser.add_argument(
        "--grpo-lr", type=float, default=None,
        help="the GRPO learning rate after its warm-up (default 3e-4 for games: at 1e-3 the "
        "first batches undid what SFT taught, games with an invalid move 28%% -> 52%% in one "
        "batch; 1e-4 for moves, whose SFT model 3e-4 made worse)",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-lr-schedule", choices=("linear", "constant"), default="linear",
        help="after the warm-up, --grpo-lr decays linearly to 0 by the last batch (TRL's "
        "default) or holds; held, seed 42 lost 18%% of games against the optimal opponent "
        "where the decay lost 5%% (bench/README.md, \"A learning rate that holds\")",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-warmup-steps", type=int, default=8,
        help="optimizer steps of linear warm-up to --grpo-lr (TRL's warmup_steps)",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-beta", type=float, default=None,
        help="TRL's beta: the KL penalty to the SFT model, per token (default 0 for games; "
        "0.1 for moves: it held the SFT model's draws against the optimal opponent over 300 "
        "batches while GRPO took its invalid moves)",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-train-from", default=None, metavar="MARKER",
        help="train each turn from this marker on (the run's train_from, e.g. '<move>'): "
        "the thought before it is sampled but not trained, so GRPO cannot rewrite what "
        "its reward never scores",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-seed", type=int, default=42,
        help="TRL's seed (sampling, the examples' order): replicate GRPO on one SFT checkpoint",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-temperature", type=float, default=1.5,
        help="GRPO's sampling temperature (the evaluation samples at 1): hotter, the groups "
        "of an SFT model this sure of itself differ and show GRPO the unlikely answers the "
        "evaluation still samples; at 1, seed 42 left 2.6%% of games against optimal with "
        "an invalid move, at 1.5 0.8%% (bench/README.md, \"The talk's second stage, hotter\")",
    )  # fmt: skip
    parser.add_argument(
        "--max-staleness", type=int, default=0,
        help="asynchronous rollouts: batches played ahead by a policy up to this many "
        "optimizer steps old (0: lockstep; bench/results/async.md)",
    )  # fmt: skip
    parser.add_argument(
        "--scale-rewards", choices=("group", "batch", "none"), default="group",
        help="TRL's scale_rewards: each advantage divided by its group's spread of rewards, "
        "the batch's, or by nothing; by the group's, 8 answers that differ only in a "
        "hundredth of win_chance weigh as much as a group holding an invalid move; batch "
        "did no better on seed 42 (bench/README.md, \"Advantages scaled by the batch's spread\")",
    )  # fmt: skip
    parser.add_argument(
        "--loss-type", default="grpo", help="TRL's loss_type: grpo, cispo (the talk's), dapo..."
    )
    parser.add_argument(
        "--invalid-weight", type=float, default=5.0,
        help="GRPO's weight on the invalid_move reward (-0.1 for a game with an invalid "
        "move; the environment's weight is 1): heavier, the penalty is not drowned in the "
        "spread of the wins",
    )  # fmt: skip
    parser.add_argument(
        "--invalid-move-cost",
        type=float,
        default=0.25,
        help="GRPO's reward lost per invalid move (the invalid_moves score metric), on top of "
        "the invalid_move component's once per game",
    )
    parser.add_argument(
        "--train-opponent", type=float, nargs=2, default=(0.5, 1.0), metavar=("MIN", "MAX"),
        help="the training opponent's random-move probability range; the talk's stage 1 "
        "(0.2-0.7) gives this tiny model too few wins to learn from",
    )  # fmt: skip
    parser.add_argument(
        "--train-max-turns", type=int, default=None, metavar="N",
        help="the training games' turn limit (the environment's max_turns, 8 by default, "
        "which evaluation keeps): fewer, each invalid move costs more games",
    )  # fmt: skip
    parser.add_argument("--eval-games", type=int, default=500)
    parser.add_argument(
        "--eval-concurrency", type=int, default=32,
        help="games evaluated at once, their moves generated as one batch (more on a GPU)",
    )  # fmt: skip
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument(
        "--max-tokens-per-turn", type=int, default=48,
        help="the warm-up answers are at most 39 tokens with the tiny tokenizer; a turn's "
        "generation lasts until its longest answer ends, so a generous cap costs time",
    )  # fmt: skip
    parser.add_argument(
        "--sft-checkpoint", type=Path,
        help="where the SFT model and its stages' results are kept: loaded from there if "
        "they exist (only GRPO then runs), else saved there; to try GRPO settings on one "
        "warm-up",
    )  # fmt: skip
    parser.add_argument(
        "--grpo-checkpoint", type=Path,
        help="where the GRPO model is saved once trained, with its tokenizer: for "
        "bench.invalid_moves to look at its games",
    )  # fmt: skip
    parser.add_argument(
        "--sft-only", action="store_true",
        help="stop once the SFT model and its results are saved to --sft-checkpoint",
    )  # fmt: skip
    parser.add_argument(
        "--native-kernels", action="store_true",
        help="let PyTorch and MKL use the CPU's widest instructions (AVX-512 where it has "
        "them) instead of AVX2 on every machine: maybe faster, but the model trained then "
        "depends on the CPU (bench/kernels.py)",
    )  # fmt: skip
    parser.add_argument(
        "--results", type=Path, default=RESULTS,
        help="where the table, the JSON and the curve go",
    )  # fmt: skip
    args = parser.parse_args()
    games = args.task == "game"
    if args.warmup_noise is None:
        args.warmup_noise = 0.1 if games else 0.0
    if args.grpo_lr is None:
        args.grpo_lr = 3e-4 if games else 1e-4
    if args.sft_steps is None:
        args.sft_steps = 800 if games else 3500
    if args.grpo_steps is None:
        args.grpo_steps = 30 if games else 300
    if args.grpo_beta is None:
        args.grpo_beta = 0.0 if games else 0.1
    if args.warmup_ties is None:
        args.warmup_ties = "random" if games else "wins"
    if args.warmup_opponent is None:
        args.warmup_opponent = args.train_opponent if games else (0.0, 1.0)
    if args.sft_only and args.sft_checkpoint is None:
        parser.error("--sft-only needs --sft-checkpoint, where the SFT stage is saved")
    if not args.native_kernels:
        kernels.rerun_pinned()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    started = time.time()
    with embedded_service() as (url, scratch):
        report = run_stages(url, args, scratch)
    if report is None:
        print(f"SFT stage saved to {args.sft_checkpoint}", flush=True)
        return
    minutes = (time.time() - started) / 60 + report.pop("earlier_minutes", 0.0)
    report["minutes"] = round(minutes, 1)
    report["device"] = _device()
    write(report, args.results)


@contextlib.contextmanager
def embedded_service() -> Iterator[tuple[str, Path]]:
    """A service of the benchmark's own on embedded defaults (the in-process store,
    SQLite), and a scratch directory that goes with it: the service's URL and the
    directory."""
    with tempfile.TemporaryDirectory() as scratch:
        database = f"sqlite:///{scratch}/archive.db"
        upgrade(database)
        server = ServiceProcess({
            "WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": "", "WANDER_LOG_LEVEL": "warning",
        }).start()  # fmt: skip
        try:
            yield server.url, Path(scratch)
        finally:
            server.kill()


def run_stages(url: str, args: argparse.Namespace, scratch: Path) -> dict[str, Any] | None:
    """The stages' results, or None where ``--sft-only`` stopped after saving SFT."""
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report: dict[str, Any] = {"args": options, "stages": {}}
    stage = report["stages"]
    low, high = args.train_opponent
    train_opponent = {"min_random_move_prob": low, "max_random_move_prob": high}
    turn_limit = {} if args.train_max_turns is None else {"max_turns": args.train_max_turns}

    def evaluate_stage(name: str, games: int) -> None:
        started = time.time()
        sampling = Sampling(args.max_tokens_per_turn, 1.0, 1.0)
        policy: Any = BackendPolicy(TransformersBackend(model, tokenizer, sampling), tokenizer)
        if args.task == "move":  # trained on one position: shown one
            policy = LatestTurn(policy)
        stage[name] = asyncio.run(_evaluate(url, policy, games, name, args.eval_concurrency))
        print(f"{name} ({time.time() - started:.0f} s):", stage[name], flush=True)

    record = args.sft_checkpoint / "stages.json" if args.sft_checkpoint else None
    if record is not None and record.exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(record.parent)
        model = AutoModelForCausalLM.from_pretrained(record.parent)
        earlier = json.loads(record.read_text())
        report["args"].update(earlier["args"])  # the stages it ran decide these
        stage.update(earlier["stages"])
        report["earlier_minutes"] = earlier["minutes"]
        report["sft_weights"] = earlier.get("sft_weights")  # absent from older checkpoints
        report["sft_device"] = earlier.get("sft_device")  # likewise
    else:
        import torch

        started = time.time()
        tokenizer = build_tokenizer()
        model = build_model(tokenizer, hidden_size=args.hidden, layers=args.layers)
        model.to("cuda" if torch.cuda.is_available() else "cpu")  # the trainers would move it later
        evaluate_stage("base", min(args.eval_games, BASE_EVAL_GAMES))
        warmup_opponent = dict(zip(train_opponent, args.warmup_opponent, strict=True))
        warm_up(url, model, tokenizer, args, warmup_opponent, scratch)
        report["sft_weights"] = weights_digest(model)
        report["sft_device"] = _device()
        evaluate_stage("sft", args.eval_games)
        if record is not None:
            model.save_pretrained(record.parent)
            tokenizer.save_pretrained(record.parent)
            kept = (
                "task", "warmup_games", "warmup_noise", "warmup_ties", "warmup_positions",
                "warmup_opponent", "sft_steps", "hidden", "layers", "eval_games",
            )  # fmt: skip
            earlier = {
                "args": {key: report["args"][key] for key in kept},
                "stages": stage,
                "sft_weights": report["sft_weights"],
                "sft_device": report["sft_device"],
                "minutes": round((time.time() - started) / 60, 1),
            }
            record.write_text(json.dumps(earlier, indent=2) + "\n")
        if args.sft_only:
            return None

    if args.grpo_beta:
        keep_as_reference(model, scratch / "sft-model")
    env = TASKS[args.task]
    games = args.task == "game"
    run = GRPORunConfig(
        model="tiny", url=url, env=env, examples=4096, run="grpo",
        env_config=(
            {**train_opponent, "num_groups": args.grpo_prompts, **turn_limit}
            if games
            else {
                "positions": args.grpo_positions,
                "endgame_share": args.grpo_endgames,
                "min_random_move_prob": args.grpo_opponent[0],
                "max_random_move_prob": args.grpo_opponent[1],
            }
        ),
        output_dir=str(scratch / "grpo"),
        max_completion_length=768 if games else args.max_tokens_per_turn,
        max_staleness=args.max_staleness,
        train_from=args.grpo_train_from,
        metric_rewards=(
            {"invalid_moves": -args.invalid_move_cost} if games and args.invalid_move_cost else {}
        ),
        sampling={
            "max_tokens_per_turn": args.max_tokens_per_turn,
            "temperature": args.grpo_temperature,
        },
        grpo={"num_generations": 8, "generation_batch_size": 8 * args.grpo_prompts,
              "per_device_train_batch_size": 8 * args.grpo_prompts // args.updates_per_batch,
              "max_steps": args.grpo_steps * args.updates_per_batch,
              "learning_rate": args.grpo_lr, "warmup_steps": args.grpo_warmup_steps,
              "lr_scheduler_type": {"linear": "linear", "constant": "constant_with_warmup"}[
                  args.grpo_lr_schedule],
              "logging_steps": 1,
              "loss_type": args.loss_type, "scale_rewards": args.scale_rewards,
              "beta": args.grpo_beta, "save_strategy": "no",
              "gradient_checkpointing": False,  # TRL's default; a fifth of each update here
              "seed": args.grpo_seed},
    )  # fmt: skip
    with WanderClient(url) as wander:
        components = wander.environment(env).reward_components
        run.grpo["reward_weights"] = [
            *(args.invalid_weight if c.name == "invalid_move" else c.weight for c in components),
            *run.metric_rewards.values(),
        ]
        trainer = grpo_trainer(run, wander, model, tokenizer)
        trainer.train()
    if args.grpo_checkpoint is not None:
        trainer.save_model(str(args.grpo_checkpoint))
    report["grpo_weights"] = weights_digest(trainer.model)
    report["curve"] = [e for e in trainer.state.log_history if "reward" in e]
    evaluate_stage("grpo", report["args"]["eval_games"])
    return report


def keep_as_reference(model: Any, folder: Path) -> None:
    """Make ``model`` as it is now the one TRL's KL penalty (``beta``) holds GRPO to:
    TRL builds that reference anew from the path the policy's config names, and a model
    trained in this process names none (one loaded from ``--sft-checkpoint`` names it)."""
    if not model.config._name_or_path:
        model.save_pretrained(folder)
        model.config._name_or_path = str(folder)


def warm_up(
    url: str,
    model: Any,
    tokenizer: Any,
    args: argparse.Namespace,
    opponent: dict[str, float],
    scratch: Path,
) -> None:
    """SFT on the minimax baseline (``--warmup-noise`` of its moves random, its ties
    as ``--warmup-ties`` says): its non-lost games; with ``--task move`` each of their
    turns as the evaluation shows it (``latest_turns``), or tictactoe_move's moves
    (``--warmup-positions marks``). Played on the train split (the stages are
    evaluated on the eval split) one at a time: the baseline's random draws then fall
    in the same games on every run, and so the SFT data and model repeat (concurrent
    games drew them in whatever order the games happened to interleave, and each run
    trained its own SFT model)."""
    env = TASKS["move"] if args.task == "move" and args.warmup_positions == "marks" else "tictactoe"
    games = env == "tictactoe"
    baseline = MinimaxPolicy(noise=args.warmup_noise, seed=0, ties=args.warmup_ties)

    async def play() -> Evaluation:
        async with AsyncWanderClient(url) as wander:
            return await evaluate(
                wander, env, baseline, examples=args.warmup_games,
                config=opponent if games else {}, split="train", run="warmup", concurrency=1,
                progress=False,
            )  # fmt: skip

    played = asyncio.run(play())
    lost = {"loss"} if games else set()
    kept = [r for r in played.results if r.error is None and r.metrics.get("outcome") not in lost]
    rows = exported(url, "warmup", len(kept), exclude_outcome=sorted(lost), status="done")
    if games and args.task == "move":  # each distinct turn once: the rare weigh as the opening
        turns = (turn for row in rows for turn in latest_turns(row["messages"]))
        rows = list({json.dumps(turn, sort_keys=True): turn for turn in turns}.values())
        print(f"{len(rows)} distinct turns in {len(kept)} warm-up games", flush=True)
    options = {
        "output_dir": str(scratch / "sft"), "max_steps": args.sft_steps, "learning_rate": 3e-3,
        "per_device_train_batch_size": 16, "logging_steps": 50, "max_length": 1024,
        "lr_scheduler_type": "cosine", "warmup_steps": 20,
    }  # fmt: skip
    sft_trainer(rows, model, tokenizer, options).train()


def latest_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript's turns, one SFT row each, as ``LatestTurn`` shows a game to a model
    trained one move at a time: the system prompt, the latest message, the answer."""
    parsed = [Message.model_validate(message) for message in messages]
    return [
        {"messages": [m.model_dump(exclude_none=True) for m in latest_turn(parsed[:k])] + [answer]}
        for k, answer in enumerate(messages)
        if answer["role"] == "assistant"
    ]


def exported(
    url: str, run: str, games: int, timeout: float = 120, **filters: Any
) -> list[dict[str, Any]]:
    """``WanderClient.export`` of ``run`` once its ``games`` finished games are archived.

    The archive writes a finished game within its flush interval on a quiet machine; on
    a busy one later, and an export that does not wait for them trains on part of the
    warm-up (a fixed two-second sleep here did)."""
    with WanderClient(url) as wander:
        deadline = time.monotonic() + timeout
        while len(rows := wander.export(run, **filters)) < games:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(rows)} of {run}'s {games} games archived after {timeout:g} s"
                )
            time.sleep(0.5)
    return rows


def weights_digest(model: Any) -> str:
    """The SHA-256 of the model's weights, each tensor's name and bytes in name order:
    two SFT stages that print the same digest trained the same model, so a difference
    in their tables is the evaluation's sampling, and different digests say the
    training itself did not repeat (another CPU's arithmetic, other data)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)  # any dtype
        digest.update(raw.numpy().tobytes())
    return digest.hexdigest()


def _device() -> str:
    """What trained: the GPU's name where TRL used one, else the CPU's and the level of
    its kernels (``AMD EPYC 7B13 (AVX2 kernels)``)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"{kernels.cpu_name() or 'CPU'} ({kernels.capability()} kernels)"


def write(report: dict[str, Any], results: Path) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "learning.json").write_text(json.dumps(report, indent=2) + "\n")
    args, stages = report["args"], report["stages"]
    games = args["eval_games"]
    low, high = args["train_opponent"]
    limit = args.get("train_max_turns")  # absent from reports older than the option
    turns = "" if limit is None else f"with {limit} turns at most "
    games_task = args.get("task", "game") == "game"  # absent from reports older than the option
    cost = args.get("invalid_move_cost") if games_task else None  # likewise; a game's metric
    per_move = f", {cost:g} per invalid move" if cost else ""
    warmup = args.get("grpo_warmup_steps")  # likewise
    warmed = f" after {warmup} warm-up steps" if warmup else ""
    if args.get("grpo_lr_schedule") == "constant":  # absent from reports older than the option
        warmed = f" held{warmed}"
    temperature = args.get("grpo_temperature", 1.0)  # likewise
    hotter = f", sampled at temperature {temperature:g}" if temperature != 1.0 else ""
    beta = args.get("grpo_beta")  # likewise
    held = f", KL penalty {beta:g} to the SFT model" if beta else ""
    scaled = args.get("scale_rewards", "group")  # likewise
    held += {"batch": ", rewards scaled by the batch's spread", "none": ", rewards unscaled"}.get(
        scaled, ""
    )
    marker = args.get("grpo_train_from")  # likewise
    held += f", each turn trained from {marker} on" if marker else ""
    noise = args.get("warmup_noise", 0.1)  # likewise
    warmup_low, warmup_high = args.get("warmup_opponent") or (low, high)
    ties = args.get("warmup_ties") or "random"  # likewise
    baseline = f"minimax, {ties} ties, {noise:.0%} random moves"
    digest = report.get("sft_weights")  # absent from reports older than the digest
    where = f" (trained on {report['sft_device']})" if report.get("sft_device") else ""
    trained = f" The SFT model's weights{where}: SHA-256 {digest[:16]}." if digest else ""
    if report.get("grpo_weights"):  # absent from reports older than its digest
        trained += f" The GRPO model's: {report['grpo_weights'][:16]}."
    played = (
        f"{args['warmup_games']} warm-up games ({baseline}, against a "
        f"{warmup_low:.0%}-{warmup_high:.0%} random opponent)"
    )
    if games_task:
        warmup_data = played
        grpo_data = f"games against a {low:.0%}-{high:.0%} random opponent {turns}"
    else:
        warmup_data = (
            f"{args['warmup_games']} warm-up moves of tictactoe_move ({baseline})"
            if args.get("warmup_positions", "marks") == "marks"
            else f"{played}, each turn as its latest message"
        )
        endgames = args.get("grpo_endgames")  # absent from reports older than the option
        last_cells = f", {endgames:.0%} of them a game's last free cell" if endgames else ""
        opponent = tuple(args.get("grpo_opponent") or (0.0, 1.0))  # likewise
        if opponent != (0.0, 1.0):
            last_cells += f", played against a {opponent[0]:.0%}-{opponent[1]:.0%} random opponent"
        grpo_data = f"moves of tictactoe_move{last_cells}, the evaluation's games shown their "
        grpo_data += "latest turn "
    lines = [
        f"Tiny model ({args['hidden']} hidden, {args['layers']} layers) from scratch on "
        f"{report['device']}, "
        f"{report['minutes']} minutes in all: {warmup_data}, "
        f"{args['sft_steps']} SFT steps, {args['grpo_steps']} GRPO steps of "
        f"{args['grpo_prompts']} x 8 {grpo_data}"
        f"({args['loss_type']} loss, lr {args['grpo_lr']:g}{warmed}{hotter}{held}, "
        f"{args['updates_per_batch']} optimizer steps per batch, invalid-move weight "
        f"{args['invalid_weight']:g}{per_move}). "
        "Each stage evaluated on "
        f"{games} eval games per opponent "
        f"(the untrained base on {min(games, BASE_EVAL_GAMES)}) by the service (a rate's "
        f"standard error is at most {50 / math.sqrt(games):.0f} "
        f"points).{trained}",
        "",
        "| stage | vs random: win / draw / loss | vs optimal: win / draw / loss | format "
        "| games with an invalid move: vs random / vs optimal |",
        "|---|---|---|---|---|",
    ]
    for name, table in stages.items():
        r, o = table["random"], table["optimal"]
        fmt = (r["format"] + o["format"]) / 2
        lines.append(
            f"| {name} | {r['win']:.0%} / {r['draw']:.0%} / {r['loss']:.0%} "
            f"| {o['win']:.0%} / {o['draw']:.0%} / {o['loss']:.0%} | {fmt:.0%} "
            f"| {r['invalid']:.0%} / {o['invalid']:.0%} |"
        )
    changes = [
        ("wins against the random opponent", "random", "win"),
        ("games lost against the optimal opponent", "optimal", "loss"),
        ("games with an invalid move, against the random opponent", "random", "invalid"),
        ("games with an invalid move, against the optimal opponent", "optimal", "invalid"),
    ]
    lines += ["", "GRPO - SFT, in points, with the 95% interval:", ""]
    lines += [
        difference(what, stages["sft"], stages["grpo"], opponent, rate, games)
        for what, opponent, rate in changes
    ]
    failed = {
        f"{name} vs {opponent}": row["errors"]
        for name, table in stages.items()
        for opponent, row in table.items()
        if row.get("errors")
    }
    if failed:
        counts = ", ".join(f"{where} {count}" for where, count in failed.items())
        lines += ["", f"Games that failed and are not counted in their row: {counts}."]
    (results / "learning.md").write_text("\n".join(lines) + "\n")
    plot(report["curve"], report["device"], results / "learning.png")
    print("\n".join(lines))


def difference(
    what: str,
    before: dict[str, dict[str, float]],
    after: dict[str, dict[str, float]],
    opponent: str,
    rate: str,
    games: int,
) -> str:
    """A list item: the change of one rate from ``before`` to ``after`` in points, and
    its 95% interval (two independent samples of ``games`` games each)."""
    p, q = before[opponent][rate], after[opponent][rate]
    error = 1.96 * math.sqrt((p * (1 - p) + q * (1 - q)) / games)
    return (
        f"- {what}: {100 * (q - p):+.0f} ({100 * (q - p - error):+.0f} to "
        f"{100 * (q - p + error):+.0f})"
    )


def plot(curve: list[dict[str, Any]], device: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.6))
    steps = [entry["step"] for entry in curve]
    lines = {
        "reward": "reward",
        "rewards/win/mean": "win",
        "rewards/value/mean": "value (1 won, 0.5 drawn)",
        "rewards/optimal/mean": "optimal",
        "rewards/win_chance/mean": "win_chance (against random)",
        "rewards/format/mean": "format",
        "rewards/invalid_move/mean": "invalid_move (-0.1 a game with one)",
        "rewards/invalid_moves/mean": "invalid moves a game (the metric, unweighted)",
    }
    for key, label in lines.items():
        if any(key in entry for entry in curve):  # the metric's only where it is a reward
            axis.plot(steps, [entry.get(key, float("nan")) for entry in curve], label=label)
    axis.set(
        xlabel="GRPO step",
        ylabel="mean over the batch",
        title=f"GRPO on tic-tac-toe (tiny model, {device})",
    )
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)  # below: no line hidden
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
