"""Options and helpers shared by the subcommands."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", envvar="WANDER_URL", help="The Wander service [default: http://127.0.0.1:8000]."
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


def service_settings() -> Any:
    """The service's settings; a clear error where only the client is installed."""
    try:
        from wander.service.settings import Settings
    except ImportError as exc:
        raise typer.BadParameter(
            f"the service is not installed ({exc.name} is missing): "
            "pip install 'wander-rl[service]'"
        ) from exc
    return Settings()
