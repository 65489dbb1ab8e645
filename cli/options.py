"""Options and helpers shared by the subcommands."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer

from wander.extras import install_command

P = ParamSpec("P")
R = TypeVar("R")


def http_url(value: str | None) -> str | None:
    """An http(s) URL with a host, checked when the options are read: a typo is a usage
    error at once, not a retried request that fails seconds later."""
    if value is None:
        return None
    import httpx

    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise typer.BadParameter(f"{value!r} is not a URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise typer.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="WANDER_URL",
        callback=http_url,
        help="The Wander service (default: http://127.0.0.1:8000).",
    ),
]
ApiKeyOption = Annotated[
    str | None, typer.Option("--api-key", envvar="WANDER_API_KEY", help="The service's API key.")
]
ConfigOption = Annotated[
    str | None, typer.Option("--config", help="The environment's config, as JSON.")
]


def parse_config(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--config") from exc
    if not isinstance(config, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--config")
    return config


def fail(message: str) -> NoReturn:
    """End the command with one line on stderr and exit status 1: for what went wrong
    while it ran, where a usage error (status 2, in a box) would blame the options."""
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(1)


INTERRUPTED = 130
"""The exit status of a command interrupted by Ctrl-C or SIGTERM (128 + SIGINT)."""


def interruptible(main: Callable[[], Coroutine[Any, Any, R]], what: str = "") -> R:
    """``asyncio.run(main())``, where SIGTERM interrupts as Ctrl-C does: the coroutine is
    cancelled, so its cleanup runs while its client is still open (an evaluation aborts
    the episodes it had open), then the command ends with one line (``what`` was done
    about it) and status 130."""

    async def cancelled_on_sigterm() -> R:
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await main()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(cancelled_on_sigterm())
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.echo(f"Interrupted{f': {what}' if what else ''}.", err=True)
        raise typer.Exit(INTERRUPTED) from None


def printable(text: str | None) -> str:
    """``text`` safe for a terminal: control characters (a run label may hold NUL)
    written as escapes; a missing value as ``-``."""
    if text is None:
        return "-"
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def talks_to_service(command: Callable[P, R]) -> Callable[P, R]:
    """For a command that talks to the service: an unreachable service is one line that
    names the URL tried and how to change it; an error the service answered is a
    usage error with its code (a 401 says how to pass a key). Never a traceback."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        from wander.client.errors import Unauthorized, WanderConnectionError, WanderError

        try:
            return command(*args, **kwargs)
        except WanderConnectionError as exc:
            fail(f"{exc}. Is `wander serve` running there? (--url or WANDER_URL)")
        except Unauthorized as exc:
            raise typer.BadParameter(
                f"{exc} (pass a key with --api-key or WANDER_API_KEY)"
            ) from exc
        except WanderError as exc:
            raise typer.BadParameter(str(exc)) from exc

    return run


SERVICE_MODULES = (
    "fastapi", "uvicorn", "pydantic_settings", "redis", "cachetools", "sqlalchemy", "alembic",
    "psycopg", "prometheus_client", "pythonjsonlogger", "orjson",
)  # fmt: skip
"""What the ``service`` extra installs, by import name: all are needed to serve, and another
extra may bring some of them (verifiers brings pydantic-settings)."""


def _importable(name: str) -> bool:
    """Whether module ``name`` is there, without importing it (one set to None in
    ``sys.modules`` is not: how a package is made missing without uninstalling it)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def service_settings() -> Any:
    """The service's settings; a clear error where the service extra is not installed."""
    missing = [name for name in SERVICE_MODULES if not _importable(name)]
    if missing:
        which = f" ({', '.join(missing)} missing)" if len(missing) <= 3 else ""  # else: none is
        raise typer.BadParameter(
            f"the service is not installed{which}: {install_command('service')}"
        )
    from pydantic import ValidationError

    from wander.service.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            ("WANDER_" + "_".join(map(str, error["loc"])).upper() + ": " if error["loc"] else "")
            + error["msg"].removeprefix("Value error, ")
            for error in exc.errors(include_input=False)
        )
        fail(f"the service cannot start with these settings: {problems}")
