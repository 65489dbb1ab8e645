"""Building a policy from command-line options; ``wander policy serve``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from wander.commands.train import require_trainer
from wander.extras import install_command

policy = typer.Typer(help="Baseline policies.", no_args_is_help=True)


class PolicyName(StrEnum):
    openai = "openai"
    transformers = "transformers"
    minimax = "minimax"
    random = "random"


class BaselineName(StrEnum):
    minimax = "minimax"
    random = "random"


class Ties(StrEnum):
    """How the minimax baseline chooses among its best moves (``MinimaxPolicy``'s ties)."""

    random = "random"
    wins = "wins"


TiesOption = Annotated[
    Ties,
    typer.Option(
        help="minimax: among the best moves, any at random, or the likeliest to win against "
        "a random opponent (wins 96% of such games, random ties 87%)."
    ),
]


def make_policy(
    name: PolicyName | BaselineName,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    sampling: dict[str, Any] | None = None,
    noise: float = 0.0,
    ties: Ties = Ties.random,
    seed: int | None = None,
) -> Any:
    from wander.client.policies import MinimaxPolicy, OpenAIChatPolicy, RandomPolicy

    if name.value == "openai":
        if not model:
            raise typer.BadParameter("the openai policy needs --model", param_hint="--model")
        return OpenAIChatPolicy(
            model,
            base_url or "https://api.openai.com/v1",
            api_key_env=api_key_env,
            sampling=sampling,
            seed=seed,
        )
    if name.value == "transformers":
        return _transformers_policy(model, sampling or {})
    if name.value == "minimax":
        return MinimaxPolicy(noise=noise, seed=seed, ties=ties.value)
    return RandomPolicy(seed=seed)


def _transformers_policy(model: str | None, sampling: dict[str, Any]) -> Any:
    if not model:
        raise typer.BadParameter(
            "the transformers policy needs --model: a checkpoint directory, a hub id or tiny",
            param_hint="--model",
        )
    require_trainer()
    from wander.trainer.backends import Sampling
    from wander.trainer.policy import transformers_policy

    defaults = Sampling()
    return transformers_policy(
        model,
        Sampling(
            sampling.get("max_tokens", defaults.max_new_tokens),
            sampling.get("temperature", defaults.temperature),
        ),
    )


@policy.command("serve")
def serve(
    name: Annotated[
        BaselineName, typer.Option("--policy", help="The baseline that answers.")
    ] = BaselineName.minimax,
    noise: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Minimax: chance of a random move.")
    ] = 0.0,
    ties: TiesOption = Ties.random,
    seed: Annotated[int | None, typer.Option(help="Seed of the baseline's choices.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8001,
) -> None:
    """Serve a tic-tac-toe baseline as an OpenAI-compatible /v1/chat/completions.

    Point any OpenAI client (or `wander eval --policy openai`) at
    http://HOST:PORT/v1 to smoke-test a pipeline with no GPU and no API key.
    """
    try:
        import uvicorn

        from wander.client.policy_server import create_policy_app
    except ImportError as exc:
        raise typer.BadParameter(
            f"serving needs FastAPI and uvicorn ({exc.name} is missing): "
            f"{install_command('service')}"
        ) from exc
    app = create_policy_app(make_policy(name, noise=noise, ties=ties, seed=seed), name.value)
    typer.echo(f"Baseline {name.value} on http://{host}:{port}/v1 (model name: {name.value})")
    uvicorn.run(app, host=host, port=port, log_level="warning")
