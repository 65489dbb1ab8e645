"""The ``wander`` command. Each subcommand imports what it needs when it runs, so
the client-only install never imports the service."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    help="Wander: environments as a service for RL of language-model agents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Wander: environments as a service for RL of language-model agents."""


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes (needs Redis if > 1).")] = 1,
) -> None:
    """Run the HTTP service (settings from WANDER_* environment variables)."""
    try:
        import uvicorn

        from service.settings import Settings
    except ImportError as exc:
        raise typer.BadParameter(
            f"the service is not installed ({exc.name} is missing): "
            "pip install 'wander-rl[service]'"
        ) from exc

    settings = Settings()
    if workers > 1 and not settings.redis_url:
        raise typer.BadParameter(
            "several workers need a shared store: set WANDER_REDIS_URL, or use --workers 1 "
            "(the in-process store lives in one process)",
            param_hint="--workers",
        )
    store = f"Redis at {settings.redis_url}" if settings.redis_url else "the in-process store"
    typer.echo(f"Wander on http://{host}:{port} with {store}, {workers} worker(s)")
    uvicorn.run(
        "service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level,
    )
