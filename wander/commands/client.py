"""Client commands: ``wander envs``, ``eval``, ``play`` and ``export``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from wander.commands.policies import PolicyName, make_policy
from wander.options import ApiKeyOption, ConfigOption, UrlOption, parse_config


def _fail(exc: Exception, hint: str | None = None) -> typer.BadParameter:
    return typer.BadParameter(str(exc), param_hint=hint)


def envs(url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """List the service's environments."""
    from rich.console import Console
    from rich.table import Table

    from wander.client import WanderClient, WanderError

    try:
        with WanderClient(url, api_key) as wander:
            environments = wander.environments()
    except WanderError as exc:
        raise _fail(exc, "--url") from exc
    table = Table("name", "kind", "version", "splits", "reward components (weight)")
    for env in environments:
        splits = ", ".join(f"{name} {size}" for name, size in env.splits.items())
        rewards = ", ".join(f"{c.name} {c.weight:g}" for c in env.reward_components)
        table.add_row(env.name, env.kind, env.version, splits, rewards)
    console = Console()
    console.print(table)
    for env in environments:
        console.print(f"[bold]{env.name}[/bold]: {env.description}")


def evaluate(
    env: Annotated[str, typer.Argument(help="The environment.")],
    policy: Annotated[PolicyName, typer.Option(help="What plays.")] = PolicyName.openai,
    model: Annotated[
        str | None,
        typer.Option(help="openai: the model name; transformers: a checkpoint, hub id or tiny."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="openai: the endpoint [default: OpenAI's].")
    ] = None,
    api_key_env: Annotated[
        str, typer.Option(help="openai: environment variable holding the key.")
    ] = "OPENAI_API_KEY",
    temperature: Annotated[
        float | None, typer.Option(help="openai/transformers: sampling temperature.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="openai/transformers: tokens per answer.")
    ] = None,
    noise: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="minimax: chance of a random move.")
    ] = 0.0,
    seed: Annotated[int | None, typer.Option(help="minimax/random: seed.")] = None,
    examples: Annotated[int, typer.Option("-n", "--examples", min=1, help="Examples.")] = 10,
    rollouts: Annotated[int, typer.Option("-r", "--rollouts", min=1, help="Per example.")] = 1,
    concurrency: Annotated[int, typer.Option("-c", "--concurrency", min=1)] = 16,
    config: ConfigOption = None,
    split: Annotated[str, typer.Option(help="The dataset split.")] = "eval",
    run: Annotated[str | None, typer.Option(help="Run label for the archive.")] = None,
    output: Annotated[Path | None, typer.Option(help="Results, one JSON line per episode.")] = None,
    plot: Annotated[Path | None, typer.Option(help="PNG of rewards and outcomes.")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Evaluate a policy: examples x rollouts episodes, played concurrently."""
    from rich.console import Console

    from wander.client import AsyncWanderClient, WanderError
    from wander.client.evaluation import evaluate as run_evaluation
    from wander.client.report import plot as save_plot
    from wander.client.report import summary_table

    sampling = {"temperature": temperature, "max_tokens": max_tokens}
    player = make_policy(
        policy,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        sampling={k: v for k, v in sampling.items() if v is not None},
        noise=noise,
        seed=seed,
    )

    async def main() -> Any:
        async with AsyncWanderClient(url, api_key) as wander:
            return await run_evaluation(
                wander, env, player, examples=examples, rollouts=rollouts,
                concurrency=concurrency, config=parse_config(config), split=split, run=run,
            )  # fmt: skip

    try:
        evaluation = asyncio.run(main())
    except WanderError as exc:
        raise _fail(exc) from exc
    console = Console()
    console.print(summary_table(evaluation.summary))
    if output:
        evaluation.save_jsonl(output)
        console.print(f"Results: {output}")
    if plot:
        save_plot(evaluation, plot)
        console.print(f"Plot: {plot}")


def play(
    env: Annotated[str, typer.Argument(help="The environment.")] = "tictactoe",
    config: ConfigOption = None,
    example: Annotated[int | None, typer.Option(help="Example index [default: random].")] = None,
    split: Annotated[str, typer.Option(help="The dataset split.")] = "eval",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Play an episode yourself, in the terminal (type a cell number, or a whole answer)."""
    from rich.console import Console

    from wander.client import AsyncWanderClient, WanderError
    from wander.client.policies import HumanPolicy

    console = Console()
    human = HumanPolicy(console)

    async def main() -> Any:
        async with AsyncWanderClient(url, api_key) as wander:
            [episode] = await wander.create(
                env, config=parse_config(config), example=example, split=split
            )
            while not episode.done:
                await episode.step(await human.act(episode.messages))
            console.print(episode.messages[-1].content)
            return await episode.score()

    try:
        score = asyncio.run(main())
    except WanderError as exc:
        raise _fail(exc) from exc
    components = ", ".join(f"{name} {value:g}" for name, value in score.components.items())
    console.print(f"[bold]Total reward {score.total:g}[/bold] ({components})")


def export(
    run: Annotated[str, typer.Argument(help="The run label.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="JSONL file (default: stdout).")
    ] = None,
    env: Annotated[str | None, typer.Option(help="Only this environment.")] = None,
    outcome: Annotated[
        list[str] | None, typer.Option(help="Keep these outcomes (repeatable).")
    ] = None,
    exclude_outcome: Annotated[
        list[str] | None, typer.Option(help="Drop these outcomes (repeatable), e.g. loss.")
    ] = None,
    min_reward: Annotated[float | None, typer.Option(help="Lowest total reward kept.")] = None,
    max_reward: Annotated[float | None, typer.Option(help="Highest total reward kept.")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Export a run's archived episodes as a chat dataset for SFT: one {"messages": [...]}
    per line, each ending on the model's last message."""
    import httpx

    from wander.client._api import episode_filters, episodes_path
    from wander.client.config import client_options
    from wander.client.errors import error_from_response

    params = episode_filters(
        env=env,
        outcome=outcome or (),
        exclude_outcome=exclude_outcome or (),
        min_reward=min_reward,
        max_reward=max_reward,
    )
    options = client_options(url, api_key, 60.0)
    lines = 0
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        with (
            httpx.Client(**options) as http,
            http.stream("GET", episodes_path(run), params={**params, "format": "jsonl"}) as answer,
        ):
            if answer.is_error:
                answer.read()
                raise _fail(error_from_response(answer.status_code, _json(answer), answer.text))
            for line in answer.iter_lines():
                if line:
                    sink.write(line + "\n")
                    lines += 1
    except httpx.TransportError as exc:
        raise _fail(f"cannot reach {options['base_url']}: {exc}", "--url") from exc  # type: ignore[arg-type]
    finally:
        if output:
            sink.close()
    if output:
        typer.echo(f"Wrote {lines} episodes of run {run!r} to {output}", err=True)


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
