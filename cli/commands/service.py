"""``wander serve`` and ``wander db``: run the service and migrate its archive."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from wander.options import fail, service_settings

db = typer.Typer(help="The archive database.", no_args_is_help=True)

DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database-url", help="SQLAlchemy URL of the archive (default: WANDER_DATABASE_URL)."
    ),
]


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes (needs Redis if > 1).")] = 1,
    console: Annotated[
        bool,
        typer.Option(
            help="Serve the web console at /console (default: WANDER_CONSOLE, on).",
            show_default=False,
        ),
    ] = True,
    openenv: Annotated[
        list[str] | None,
        typer.Option(
            "--openenv",
            metavar="NAME=MODULE:CLASS",
            help="Serve an OpenEnv Environment class as openenv/NAME (repeatable; "
            "default: WANDER_OPENENV).",
            show_default=False,
        ),
    ] = None,
    verifiers: Annotated[
        list[str] | None,
        typer.Option(
            "--verifiers",
            metavar="TASKSET",
            help="Serve a Verifiers taskset as vf/TASKSET (repeatable; default: WANDER_VERIFIERS).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the HTTP service (settings from WANDER_* environment variables).

    A SQLite archive is created and migrated on the way; any other database is
    migrated with `wander db upgrade`.
    """
    if not console:
        os.environ["WANDER_CONSOLE"] = "false"  # read by each worker's create_app
    if openenv:  # read where environments load: each worker, and its fork server
        os.environ["WANDER_OPENENV"] = ",".join(openenv)
    if verifiers:
        os.environ["WANDER_VERIFIERS"] = ",".join(verifiers)
    settings = service_settings()
    if workers > 1 and not settings.redis_url:
        raise typer.BadParameter(
            "several workers need a shared store: set WANDER_REDIS_URL, or use --workers 1 "
            "(the in-process store lives in one process)",
            param_hint="--workers",
        )
    import uvicorn

    if settings.database_url.startswith("sqlite"):
        _upgrade(settings.database_url)
    _check_keys(settings)
    store = (
        f"Redis at {_safe(settings.redis_url)}" if settings.redis_url else "the in-process store"
    )
    typer.echo(f"Wander on http://{host}:{port} with {store}, {workers} worker(s)")
    if settings.console:
        typer.echo(f"Console on http://{host}:{port}/console")
    if not settings.requires_keys and not _is_loopback(host):
        typer.secho(
            f"WARNING: no API key is configured and the service listens on {host}: anyone "
            "who reaches the port can read, play, delete and export every episode. Create "
            "keys (`wander keys create`) and set WANDER_AUTH=keys, or bind 127.0.0.1.",
            err=True,
            fg=typer.colors.RED,
            bold=True,
        )
    if settings.redis_url:
        from wander.service.store.durability import persistence_warning

        warning = persistence_warning(settings.redis_url)
        if warning:
            typer.echo(f"Warning: the Redis at {_safe(settings.redis_url)} {warning}", err=True)
    uvicorn.run(
        "wander.service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level,
        access_log=settings.access_log,
        log_config=None,  # the service logs JSON itself (service.logs)
        ws_per_message_deflate=settings.ws_compression,
        http="wander.service.http_edge:EdgeProtocol",  # the edge's limits (settings)
        timeout_keep_alive=settings.keep_alive_seconds,
    )


def _check_keys(settings: Any) -> None:
    """An open service over an archive with active keys stops here, on one line (the
    application would stop too, at start-up, in a traceback). An archive it cannot read
    now is left to the application, which warns."""
    if settings.requires_keys:
        return
    from wander.service.archive import Archive, KeyBook
    from wander.service.errors import DatabaseUnavailable
    from wander.service.keyring import open_with_active_keys

    archive = Archive(settings.database_url)
    try:
        refusal = open_with_active_keys(KeyBook(archive))
    except DatabaseUnavailable:
        return
    finally:
        archive.dispose()
    if refusal:
        fail(f"the service will not start: {refusal}")


@db.command("upgrade")
def db_upgrade(
    database_url: DatabaseOption = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the archive's tables."""
    _upgrade(database_url or service_settings().database_url, revision)


@db.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision; `base` drops everything.")],
    database_url: DatabaseOption = None,
) -> None:
    """Migrate the archive back to an earlier revision."""
    from wander.service.archive.migrations import downgrade

    url = existing_archive(database_url or service_settings().database_url)
    before = _revision(url)  # also: a database that cannot be reached ends here
    downgrade(url, revision)
    typer.echo(f"Archive {_safe(url)} is at revision {_revision(url)} (was {before})")


@db.command("current")
def db_current(database_url: DatabaseOption = None) -> None:
    """Show the archive's revision and the latest one; exit status 1 where there is no
    archive, which is not the same as an archive at no revision (an empty database)."""
    from wander.service.archive.migrations import head_revision

    url = existing_archive(database_url or service_settings().database_url)
    typer.echo(f"{_safe(url)}: revision {_revision(url)} (latest {head_revision()})")


def _upgrade(url: str, revision: str = "head") -> None:
    from wander.service.archive.migrations import upgrade

    before = _revision(url)  # also: a database that cannot be reached ends here
    upgrade(url, revision)
    after = _revision(url)
    if before == after:
        typer.echo(f"Archive {_safe(url)} is up to date (revision {after})")
    else:
        typer.echo(f"Archive {_safe(url)} migrated from revision {before} to {after}")


def existing_archive(url: str) -> str:
    """``url``, unless it names a SQLite file that does not exist: connecting to it would
    create it, so commands that only read or undo end here instead."""
    from sqlalchemy.engine import make_url

    database = make_url(url).database if url.startswith("sqlite") else None
    if database and database != ":memory:" and not Path(database).exists():
        fail(
            f"no archive at {_safe(url)}: {database} does not exist "
            "(`wander db upgrade` or `wander serve` creates it)"
        )
    return url


def _revision(url: str) -> str | None:
    """The archive's revision; a database that cannot be reached is one line naming it."""
    from sqlalchemy.exc import OperationalError

    from wander.service.archive.connect import make_engine
    from wander.service.archive.migrations import current_revision

    engine = make_engine(url)
    try:
        return current_revision(engine)
    except OperationalError as exc:
        fail(f"cannot reach the archive at {_safe(url)}: {' '.join(str(exc.orig).split())}")
    finally:
        engine.dispose()


def _is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (a name or an address)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def _safe(url: str) -> str:
    """The URL without its password, for printing."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
