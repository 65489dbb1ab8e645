"""``wander train``: GRPO against the service, SFT warm-up, and warm-up data."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from wander.extras import install_command
from wander.options import (
    ApiKeyOption,
    ConfigOption,
    UrlOption,
    fail,
    http_url,
    parse_config,
    talks_to_service,
)

if TYPE_CHECKING:
    from wander.client import WanderClient

train = typer.Typer(help="Train a policy (needs the trainer extra).",
                    no_args_is_help=True)  # fmt: skip


def require_trainer() -> None:
    try:
        import trl  # noqa: F401
    except ImportError as exc:
        raise typer.BadParameter(
            f"this needs the trainer extra ({exc.name} is missing): {install_command('trainer')}"
        ) from exc


def checkpoint(resume: str | None, output_dir: str) -> str | None:
    """The checkpoint ``--resume`` names: a folder, or ``latest``, the newest
    ``checkpoint-*`` of the run's ``output_dir``; checked before anything loads."""
    if resume is None:
        return None
    if resume != "latest":
        if not (Path(resume) / "trainer_state.json").is_file():
            raise typer.BadParameter(f"{resume} is not a checkpoint folder", param_hint="--resume")
        return resume
    from transformers.trainer_utils import get_last_checkpoint

    found = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
    if found is None:
        raise typer.BadParameter(f"{output_dir} holds no checkpoint yet", param_hint="--resume")
    return str(found)


@train.command("grpo")
@talks_to_service
def grpo(
    config: Annotated[Path, typer.Option("--config", exists=True, help="The run's TOML file.")],
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="CHECKPOINT|latest",
            help="Go on from a checkpoint folder (model, optimizer, step, data order), or "
            "`latest`: the newest checkpoint-* in the config's output_dir.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="A hub id, a local path or `tiny`: the config's `model`, overridden."
        ),
    ] = None,
    vllm_url: Annotated[
        str | None,
        typer.Option(
            "--vllm-url",
            envvar="WANDER_VLLM_URL",
            callback=http_url,
            help="The vLLM server of a run with \\[grpo] use_vllm (server mode): the config's "
            "\\[grpo] vllm_server_base_url, overridden.",
        ),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """GRPO with TRL, playing episodes on the service over HTTP (see trainer/configs/).
    --url, --api-key, --model and --vllm-url (or their environment variables) override
    the config's."""
    require_trainer()
    from wander.trainer import vllm_server
    from wander.trainer.config import load_config
    from wander.trainer.grpo import build_trainer, trl_args
    from wander.trainer.models import load, save

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        run = load_config(config)
        if model is not None:
            run = run.model_copy(update={"model": model})
        if vllm_url is not None:
            grpo = {**run.grpo, "vllm_server_base_url": vllm_url}
            run = run.model_copy(update={"grpo": grpo})
        args = trl_args(run)  # the whole [grpo] table, before the model loads
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    start = checkpoint(resume, run.output_dir)
    generator = vllm_server.server_url(args)
    if generator is not None:
        try:
            vllm_server.check(generator, run.model, args.vllm_server_timeout)
        except vllm_server.VLLMServerError as exc:
            fail(str(exc))
    policy, tokenizer = load(run.model, tools=run.rollout == "environment_factory")
    with run.client(url, api_key) as client:
        try:
            trainer = build_trainer(run, client, policy, tokenizer)
        except ValueError as exc:  # e.g. environment_factory on an environment without tools
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
        trainer.train(resume_from_checkpoint=start)
    save(trainer, tokenizer, run.output_dir)
    typer.echo(f"Saved to {run.output_dir}")


@train.command("sft")
def sft(
    data: Annotated[Path, typer.Option("--data", exists=True, help="Chat JSONL (wander export).")],
    model: Annotated[str, typer.Option(help="Hub id, local path, or `tiny`.")] = "tiny",
    output_dir: Annotated[Path, typer.Option(help="Where the model goes.")] = Path("runs/sft"),
    epochs: Annotated[float, typer.Option(min=0.01)] = 2.0,
    learning_rate: Annotated[float, typer.Option(min=0.0)] = 2e-5,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    max_steps: Annotated[int, typer.Option(help="Overrides epochs when > 0.")] = -1,
    chat_template: Annotated[
        Path | None,
        typer.Option(
            "--chat-template",
            exists=True,
            dir_okay=False,
            help="A Jinja chat template to train with, its assistant turns inside "
            "{% generation %}...{% endgeneration %} (for a model whose template lacks the "
            "markers and has no training copy in TRL).",
        ),
    ] = None,
) -> None:
    """Supervised warm-up on chat transcripts (TRL SFTTrainer), the loss on the
    assistant's turns only."""
    require_trainer()
    from wander.trainer.models import load, save
    from wander.trainer.sft import build_trainer, load_transcripts

    try:
        rows = load_transcripts(data)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from exc
    policy, tokenizer = load(model)
    options = {
        "output_dir": str(output_dir), "num_train_epochs": epochs, "max_steps": max_steps,
        "learning_rate": learning_rate, "per_device_train_batch_size": batch_size,
        "logging_steps": 10,
    }  # fmt: skip
    if chat_template is not None:
        tokenizer.chat_template = chat_template.read_text("utf-8")
    try:
        trainer = build_trainer(rows, policy, tokenizer, options)
    except ValueError as exc:  # a chat template that cannot mark the assistant's turns
        raise typer.BadParameter(str(exc), param_hint="--chat-template / --model") from exc
    trainer.train()
    save(trainer, tokenizer, str(output_dir))
    typer.echo(f"Saved to {output_dir}")


@train.command("warmup-data")
@talks_to_service
def warmup_data(
    output: Annotated[Path, typer.Option("--output", "-o", help="Chat JSONL to write.")],
    env: Annotated[str, typer.Option(help="The environment.")] = "tictactoe",
    noise: Annotated[float, typer.Option(min=0.0, max=1.0, help="Minimax noise.")] = 0.1,
    examples: Annotated[int, typer.Option("-n", min=1)] = 200,
    run: Annotated[str, typer.Option(help="Run label of the games.")] = "warmup",
    config: ConfigOption = None,
    seed: Annotated[int, typer.Option()] = 0,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Play warm-up games with the noisy minimax baseline (short reasoning included) and
    write the ones that were not lost, ready for `wander train sft` (the talk's recipe)."""
    import time

    from wander.client import AsyncWanderClient, WanderClient
    from wander.client.evaluation import evaluate
    from wander.client.policies import MinimaxPolicy

    async def play() -> int:
        async with AsyncWanderClient(url, api_key) as wander:
            done = await evaluate(
                wander, env, MinimaxPolicy(noise=noise, seed=seed), examples=examples,
                split="train", run=run, config=parse_config(config),
            )  # fmt: skip
            return done.summary.episodes - done.summary.errors

    played = asyncio.run(play())
    with WanderClient(url, api_key) as wander:
        for _ in range(100):  # the archive writes behind the games
            if _archived(wander, run) >= played:
                break
            time.sleep(0.1)
        rows = wander.export(run, exclude_outcome=["loss"], status="done")
    import json

    with output.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    typer.echo(f"Wrote {len(rows)} of {played} games (losses dropped) to {output}")


def _archived(wander: WanderClient, run: str) -> int:
    """How many of ``run``'s episodes the archive holds so far (until the first, the
    label is unknown to it)."""
    from wander.client import RunNotFound

    try:
        return wander.episodes(run, limit=1).total
    except RunNotFound:
        return 0
