"""Client commands: ``wander envs``, ``eval``, ``play``, ``runs`` and ``export``."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from wander.commands.policies import PolicyName, Ties, TiesOption, make_policy
from wander.options import (
    ApiKeyOption,
    ConfigOption,
    UrlOption,
    fail,
    http_url,
    interruptible,
    parse_config,
    printable,
    talks_to_service,
)


@talks_to_service
def envs(url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """List the service's environments."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from wander.client import WanderClient

    with WanderClient(url, api_key) as wander:
        environments = wander.environments()
        unavailable = wander.unavailable_environments()
    table = Table("name", "kind", "version", "splits", "reward components (weight)")
    for env in environments:
        splits = ", ".join(f"{name} {size}" for name, size in env.splits.items())
        rewards = ", ".join(f"{c.name} {c.weight:g}" for c in env.reward_components)
        table.add_row(env.name, env.kind, env.version, splits, rewards)
    console = Console()
    console.print(table)
    for env in environments:
        console.print(f"[bold]{escape(env.name)}[/bold]: {escape(env.description)}")
    for absent in unavailable:
        console.print(f"[bold]{escape(absent.name)}[/bold] not offered: it {escape(absent.reason)}")


@talks_to_service
def evaluate(
    env: Annotated[str, typer.Argument(help="The environment.")],
    policy: Annotated[PolicyName, typer.Option(help="What plays.")] = PolicyName.openai,
    model: Annotated[
        str | None,
        typer.Option(help="openai: the model name; transformers: a checkpoint, hub id or tiny."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(callback=http_url, help="openai: the endpoint (default: OpenAI's)."),
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
    ties: TiesOption = Ties.random,
    latest_turn: Annotated[
        bool,
        typer.Option(
            "--latest-turn",
            help="Show the policy only the system prompt and the latest turn, not the whole "
            "conversation: for a model trained one move at a time (tictactoe_move).",
        ),
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Makes the evaluation repeat: minimax/random, the seed of their choices; "
            "openai, a seed per episode sent with each request (OpenAI's and vLLM's seed)."
        ),
    ] = None,
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
    """Evaluate a policy: examples x rollouts episodes, at most --concurrency open at once.

    Exits with status 1 when an episode failed, saying how many and the first error
    (the table, --output and --plot hold the others). Interrupted (Ctrl-C, SIGTERM), it
    aborts the episodes it had open and exits with status 130.
    """
    from rich.console import Console

    from wander.client import AsyncWanderClient
    from wander.client.evaluation import evaluate as run_evaluation
    from wander.client.report import failures, require_plotting, summary_table
    from wander.client.report import plot as save_plot

    if plot:
        try:
            require_plotting()
        except ImportError as exc:
            raise typer.BadParameter(str(exc), param_hint="--plot") from exc
    sampling = {"temperature": temperature, "max_tokens": max_tokens}
    player = make_policy(
        policy,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        sampling={k: v for k, v in sampling.items() if v is not None},
        noise=noise,
        ties=ties,
        seed=seed,
    )
    if latest_turn:
        from wander.client.policies import LatestTurn

        player = LatestTurn(player)

    async def main() -> Any:
        async with AsyncWanderClient(url, api_key) as wander:
            return await run_evaluation(
                wander, env, player, examples=examples, rollouts=rollouts,
                concurrency=concurrency, config=parse_config(config), split=split, run=run,
            )  # fmt: skip

    try:
        evaluation = interruptible(main, "the episodes it had open were aborted")
    except ValueError as exc:  # the policy cannot play the environment
        raise typer.BadParameter(str(exc), param_hint="--policy") from None
    console = Console()
    console.print(summary_table(evaluation.summary))
    if output:
        evaluation.save_jsonl(output)
        console.print(f"Results: {output}")
    if plot:
        save_plot(evaluation, plot)
        console.print(f"Plot: {plot}")
    failed = failures(evaluation)
    if failed:
        fail(failed)


@talks_to_service
def play(
    env: Annotated[str, typer.Argument(help="The environment.")] = "tictactoe",
    config: ConfigOption = None,
    example: Annotated[int | None, typer.Option(help="Example index (default: random).")] = None,
    split: Annotated[str, typer.Option(help="The dataset split.")] = "eval",
    run: Annotated[str, typer.Option(help="Run label for the archive.")] = "play",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Play an episode yourself, in the terminal (type a cell number, or a whole answer);
    archived under the run label --run ("play")."""
    from rich.console import Console

    from wander.client import AsyncWanderClient
    from wander.client.policies import HumanPolicy

    console = Console()
    human = HumanPolicy(console)

    async def main() -> Any:
        async with AsyncWanderClient(url, api_key) as wander:
            [episode] = await wander.create(
                env, config=parse_config(config), example=example, split=split, run=run
            )
            while not episode.done:
                await episode.step(await human.act(episode.messages))
            console.print(episode.messages[-1].content)
            return await episode.score()

    score = asyncio.run(main())
    components = ", ".join(f"{name} {value:g}" for name, value in score.components.items())
    console.print(f"[bold]Total reward {score.total:g}[/bold] ({components})")


@talks_to_service
def runs(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Show at most this many.")] = 100,
    offset: Annotated[
        int, typer.Option(min=0, max=2**63 - 1, help="Skip this many runs first.")
    ] = 0,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """List the archive's runs, oldest first: label, episodes, environments, time span."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from wander.client import WanderClient

    with WanderClient(url, api_key) as wander:
        page = wander.runs(limit=limit, offset=offset)
    console = Console()
    whose = f" of tenant {escape(printable(page.tenant))}" if page.tenant else ""
    if page.unlabelled:
        console.print(
            f"{page.unlabelled} archived episode(s){whose} have no run label, so are in no "
            "run: create episodes with a run label (run=..., --run) to find them here."
        )
    if not page.runs:
        empty = f"No runs{whose} past the first {offset}: the archive holds {page.total}."
        console.print(f"No runs{whose} in the archive." if page.total == 0 else empty)
        return
    table = Table("run", "episodes", "envs", "first created (UTC)", "last finished (UTC)")
    for info in page.runs:
        finished = info.last_finished_at
        cells = [
            printable(info.run),
            str(info.episodes),
            ", ".join(map(printable, info.envs)),
            info.first_created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "-" if finished is None else finished.strftime("%Y-%m-%d %H:%M:%S"),
        ]
        table.add_row(*map(escape, cells))
    console.print(table)
    end = offset + len(page.runs)
    more = f"; the next with --offset {end}" if end < page.total else ""
    console.print(f"Runs{whose} {offset + 1} to {end} of {page.total}{more}")


@talks_to_service
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
    per line, each ending on the model's last message. Nothing is written unless the
    whole export arrives."""
    import httpx

    from wander.client._api import episode_filters, episodes_path
    from wander.client.config import client_options
    from wander.client.errors import error_from_response
    from wander.client.transport import unreachable

    params = episode_filters(
        env=env,
        outcome=outcome or (),
        exclude_outcome=exclude_outcome or (),
        min_reward=min_reward,
        max_reward=max_reward,
    )
    path = episodes_path(run)
    with httpx.Client(**client_options(url, api_key, 60.0)) as http:
        try:
            with http.stream("GET", path, params={**params, "format": "jsonl"}) as answer:
                if answer.is_error:
                    answer.read()
                    raise error_from_response(answer.status_code, _json(answer), answer.text)
                with _sink(output) as sink:
                    lines = _copy_lines(answer.iter_lines(), sink)
        except httpx.TransportError as exc:
            raise unreachable(http.base_url, f"GET {path}", exc) from exc
    if output:
        typer.echo(f"Wrote {lines} episodes of run {run!r} to {output}", err=True)


def _copy_lines(lines: Iterable[str], sink: IO[str]) -> int:
    count = 0
    for line in lines:
        if line:
            sink.write(line + "\n")
            count += 1
    return count


@contextmanager
def _sink(output: Path | None) -> Iterator[IO[str]]:
    """stdout, or a file beside ``output`` that replaces it only once the block
    succeeds: a failed export leaves no empty or cut-off file behind."""
    if output is None:
        yield sys.stdout
        return
    partial = output.with_name(f".{output.name}.{os.getpid()}.partial")
    try:
        sink = partial.open("x", encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    try:
        with sink:
            yield sink
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
