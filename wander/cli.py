"""The ``wander`` command. Each subcommand imports what it needs when it runs, so
the client-only install never imports the service."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

app = typer.Typer(
    help="Wander: environments as a service for RL of language-model agents.",
    no_args_is_help=True,
    add_completion=False,
)
db = typer.Typer(help="The archive database.", no_args_is_help=True)
app.add_typer(db, name="db")

DEFAULT_URL = "http://127.0.0.1:8000"

UrlOption = Annotated[str, typer.Option("--url", envvar="WANDER_URL", help="The Wander service.")]
DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database-url", help="SQLAlchemy URL of the archive (default: WANDER_DATABASE_URL)."
    ),
]


@app.callback()
def main() -> None:
    """Wander: environments as a service for RL of language-model agents."""


def _settings() -> Any:
    try:
        from service.settings import Settings
    except ImportError as exc:
        raise typer.BadParameter(
            f"the service is not installed ({exc.name} is missing): "
            "pip install 'wander-rl[service]'"
        ) from exc
    return Settings()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes (needs Redis if > 1).")] = 1,
) -> None:
    """Run the HTTP service (settings from WANDER_* environment variables).

    A SQLite archive is created and migrated on the way; any other database is
    migrated with `wander db upgrade`.
    """
    settings = _settings()
    if workers > 1 and not settings.redis_url:
        raise typer.BadParameter(
            "several workers need a shared store: set WANDER_REDIS_URL, or use --workers 1 "
            "(the in-process store lives in one process)",
            param_hint="--workers",
        )
    import uvicorn

    if settings.database_url.startswith("sqlite"):
        _upgrade(settings.database_url)
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


@db.command("upgrade")
def db_upgrade(
    database_url: DatabaseOption = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the archive's tables."""
    _upgrade(database_url or _settings().database_url, revision)


@db.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision; `base` drops everything.")],
    database_url: DatabaseOption = None,
) -> None:
    """Migrate the archive back to an earlier revision."""
    from service.archive.connect import make_engine
    from service.archive.migrations import current_revision, downgrade

    url = database_url or _settings().database_url
    downgrade(url, revision)
    engine = make_engine(url)
    typer.echo(f"Archive {_safe(url)} is at revision {current_revision(engine)}")
    engine.dispose()


@db.command("current")
def db_current(database_url: DatabaseOption = None) -> None:
    """Show the archive's revision and the latest one."""
    from service.archive.connect import make_engine
    from service.archive.migrations import current_revision, head_revision

    url = database_url or _settings().database_url
    engine = make_engine(url)
    typer.echo(f"{_safe(url)}: revision {current_revision(engine)} (latest {head_revision()})")
    engine.dispose()


def _upgrade(url: str, revision: str = "head") -> None:
    from service.archive.connect import make_engine
    from service.archive.migrations import current_revision, upgrade

    engine = make_engine(url)
    before = current_revision(engine)
    upgrade(url, revision)
    after = current_revision(engine)
    engine.dispose()
    if before == after:
        typer.echo(f"Archive {_safe(url)} is up to date (revision {after})")
    else:
        typer.echo(f"Archive {_safe(url)} migrated from revision {before} to {after}")


def _safe(url: str) -> str:
    """The URL without its password, for printing."""
    from sqlalchemy import make_url

    return make_url(url).render_as_string(hide_password=True)


@app.command()
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
    url: UrlOption = DEFAULT_URL,
) -> None:
    """Export a run's archived episodes as a chat dataset for SFT: one {"messages": [...]}
    per line, each ending on the model's last message."""
    import httpx

    params: dict[str, Any] = {
        "format": "jsonl",
        "env": env,
        "outcome": outcome or [],
        "exclude_outcome": exclude_outcome or [],
        "min_reward": min_reward,
        "max_reward": max_reward,
    }
    params = {key: value for key, value in params.items() if value is not None}
    lines = 0
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        with httpx.stream(
            "GET",
            f"{url.rstrip('/')}/v1/runs/{quote(run, safe='')}/episodes",
            params=params,
            timeout=60,
        ) as response:
            if response.is_error:
                response.read()
                raise typer.BadParameter(_error_message(response), param_hint="RUN")
            for line in response.iter_lines():
                if line:
                    sink.write(line + "\n")
                    lines += 1
    except httpx.TransportError as exc:
        raise typer.BadParameter(f"cannot reach {url}: {exc}", param_hint="--url") from exc
    finally:
        if output:
            sink.close()
    if output:
        typer.echo(f"Wrote {lines} episodes of run {run!r} to {output}", err=True)


def _error_message(response: Any) -> str:
    try:
        error = response.json()["error"]
        return f"{response.status_code} {error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code}: {response.text[:200]}"
