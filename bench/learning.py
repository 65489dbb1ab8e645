"""The learning benchmark: tiny model from scratch -> SFT warm-up -> GRPO, on CPU,
against a live service, each stage evaluated by the service.

    python -m bench.learning [--sft-steps 400] [--grpo-steps 40] [--hidden 128]
                             [--max-tokens-per-turn 64]

Writes bench/results/learning.md (the table), learning.json and learning.png
(reward components per GRPO step).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from client import AsyncWanderClient, WanderClient
from client.evaluation import evaluate
from client.policies import MinimaxPolicy
from service.archive.migrations import upgrade
from tests.servers import ServiceProcess
from trainer.backends import Sampling, TransformersBackend
from trainer.config import GRPORunConfig
from trainer.grpo import build_trainer as grpo_trainer
from trainer.policy import BackendPolicy
from trainer.sft import build_trainer as sft_trainer
from trainer.tiny import build_model, build_tokenizer

RESULTS = Path(__file__).parent / "results"
OPPONENTS = {
    "random": {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0},
    "optimal": {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0},
}


async def _evaluate(url: str, policy: Any, games: int, run: str) -> dict[str, dict[str, float]]:
    table = {}
    async with AsyncWanderClient(url) as wander:
        for name, config in OPPONENTS.items():
            result = await evaluate(
                wander, "tictactoe", policy, examples=games, config=config, split="eval",
                run=f"{run}-{name}", concurrency=32, progress=False,
            )  # fmt: skip
            summary = result.summary
            rates = summary.metrics["outcome"].rates  # type: ignore[union-attr]
            table[name] = {
                "win": rates.get("win", 0.0),
                "draw": rates.get("draw", 0.0),
                "loss": rates.get("loss", 0.0),
                "format": summary.components["format"].mean,
                "invalid": summary.metrics["invalid_moves"].nonzero_rate,  # type: ignore[union-attr]
            }
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup-games", type=int, default=300)
    parser.add_argument("--sft-steps", type=int, default=400)
    parser.add_argument("--grpo-steps", type=int, default=40)
    parser.add_argument("--grpo-prompts", type=int, default=4, help="episode groups per step")
    parser.add_argument("--grpo-lr", type=float, default=2e-4)
    parser.add_argument(
        "--train-opponent", type=float, nargs=2, default=(0.2, 0.7), metavar=("MIN", "MAX"),
        help="the training opponent's random-move probability range (the talk's stage 1)",
    )  # fmt: skip
    parser.add_argument("--eval-games", type=int, default=50)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument(
        "--max-tokens-per-turn", type=int, default=64,
        help="the warm-up answers are about 45 tokens; less cuts them off",
    )  # fmt: skip
    parser.add_argument(
        "--sft-checkpoint", type=Path,
        help="where the SFT model is kept: loaded from there if it exists (the base and SFT "
        "stages are then skipped), else saved there, to try GRPO settings on one warm-up",
    )  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    started = time.time()
    with tempfile.TemporaryDirectory() as scratch:
        database = f"sqlite:///{scratch}/archive.db"
        upgrade(database)
        env = {
            "WANDER_DATABASE_URL": database,
            "WANDER_REDIS_URL": "",
            "WANDER_LOG_LEVEL": "warning",
        }
        server = ServiceProcess(env).start()
        try:
            report = run_stages(server.url, args, Path(scratch))
        finally:
            server.kill()
    report["minutes"] = round((time.time() - started) / 60, 1)
    write(report)


def run_stages(url: str, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report: dict[str, Any] = {"args": options, "stages": {}}
    stage = report["stages"]
    low, high = args.train_opponent
    train_opponent = {"min_random_move_prob": low, "max_random_move_prob": high}

    def evaluate_stage(name: str) -> None:
        started = time.time()
        sampling = Sampling(args.max_tokens_per_turn, 1.0, 1.0)
        policy = BackendPolicy(TransformersBackend(model, tokenizer, sampling), tokenizer)
        stage[name] = asyncio.run(_evaluate(url, policy, args.eval_games, name))
        print(f"{name} ({time.time() - started:.0f} s):", stage[name], flush=True)

    checkpoint: Path | None = args.sft_checkpoint
    if checkpoint is not None and checkpoint.exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
    else:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer, hidden_size=args.hidden, layers=args.layers)
        evaluate_stage("base")
        warm_up(url, model, tokenizer, args, train_opponent, scratch)
        if checkpoint is not None:
            model.save_pretrained(checkpoint)
            tokenizer.save_pretrained(checkpoint)
    evaluate_stage("sft")

    run = GRPORunConfig(
        model="tiny", url=url, env="tictactoe", examples=4096, run="grpo",
        env_config={**train_opponent, "num_groups": args.grpo_prompts},
        output_dir=str(scratch / "grpo"), max_completion_length=768,
        sampling={"max_tokens_per_turn": args.max_tokens_per_turn, "temperature": 1.0},
        grpo={"num_generations": 8, "generation_batch_size": 8 * args.grpo_prompts,
              "per_device_train_batch_size": 8 * args.grpo_prompts,
              "max_steps": args.grpo_steps, "learning_rate": args.grpo_lr, "logging_steps": 1,
              "loss_type": "cispo", "beta": 0.0, "save_strategy": "no"},
    )  # fmt: skip
    with WanderClient(url) as wander:
        trainer = grpo_trainer(run, wander, model, tokenizer)
        trainer.train()
    report["curve"] = [e for e in trainer.state.log_history if "reward" in e]
    evaluate_stage("grpo")
    return report


def warm_up(
    url: str,
    model: Any,
    tokenizer: Any,
    args: argparse.Namespace,
    opponent: dict[str, float],
    scratch: Path,
) -> None:
    """SFT on the non-lost games of the noisy minimax baseline."""

    async def play() -> None:
        async with AsyncWanderClient(url) as wander:
            await evaluate(
                wander, "tictactoe", MinimaxPolicy(noise=0.1, seed=0), examples=args.warmup_games,
                config=opponent, run="warmup", progress=False,
            )  # fmt: skip

    asyncio.run(play())
    time.sleep(2)  # the archiver's flush interval
    with WanderClient(url) as wander:
        rows = wander.export("warmup", exclude_outcome=["loss"], status="done")
    options = {
        "output_dir": str(scratch / "sft"), "max_steps": args.sft_steps, "learning_rate": 3e-3,
        "per_device_train_batch_size": 16, "logging_steps": 50, "max_length": 1024,
        "lr_scheduler_type": "cosine", "warmup_steps": 20,
    }  # fmt: skip
    sft_trainer(rows, model, tokenizer, options).train()


def write(report: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "learning.json").write_text(json.dumps(report, indent=2) + "\n")
    games = report["args"]["eval_games"]
    lines = [
        f"Tiny model ({report['args']['hidden']} hidden, {report['args']['layers']} layers) "
        f"from scratch on CPU, {report['minutes']} minutes in all; each stage evaluated on "
        f"{games} eval games per opponent by the service (a rate's standard error is at "
        f"most {50 / math.sqrt(games):.0f} points).",
        "",
        "| stage | vs random: win / draw / loss | vs optimal: win / draw / loss | format "
        "| games with an invalid move |",
        "|---|---|---|---|---|",
    ]
    for name, table in report["stages"].items():
        r, o = table["random"], table["optimal"]
        fmt = (r["format"] + o["format"]) / 2
        invalid = (r["invalid"] + o["invalid"]) / 2
        lines.append(
            f"| {name} | {r['win']:.0%} / {r['draw']:.0%} / {r['loss']:.0%} "
            f"| {o['win']:.0%} / {o['draw']:.0%} / {o['loss']:.0%} | {fmt:.0%} | {invalid:.0%} |"
        )
    (RESULTS / "learning.md").write_text("\n".join(lines) + "\n")
    plot(report["curve"], RESULTS / "learning.png")
    print("\n".join(lines))


def plot(curve: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    steps = [entry["step"] for entry in curve]
    for key in ("reward", "rewards/win/mean", "rewards/format/mean", "rewards/invalid_move/mean"):
        axis.plot(steps, [entry.get(key, float("nan")) for entry in curve], label=key)
    axis.set(
        xlabel="GRPO step",
        ylabel="mean over the batch",
        title="GRPO on tic-tac-toe (tiny model, CPU)",
    )
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
