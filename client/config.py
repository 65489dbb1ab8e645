"""Where the service is and how to talk to it: shared by the sync and async clients."""

from __future__ import annotations

import os
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def client_options(
    base_url: str | None, api_key: str | None, timeout: float | httpx.Timeout | None
) -> dict[str, Any]:
    """httpx client options: the URL and key default to ``WANDER_URL`` and ``WANDER_API_KEY``."""
    api_key = api_key if api_key is not None else os.environ.get("WANDER_API_KEY")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return {
        "base_url": (base_url or os.environ.get("WANDER_URL") or DEFAULT_URL).rstrip("/"),
        "headers": headers,
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
    }
