"""What the tests of hosted environments (``openenv/*``, ``vf/*``) share: a ``wander
serve`` of the interop venv that has the other framework, and REST calls to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import redis_keys
from wander.testing import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120
"""Seconds a request may take: a service's first environment call starts its fork server,
which imports every environment (seconds, more on a machine busy with other tests)."""


@contextmanager
def replicas(
    redis_url: str, pytestconfig: pytest.Config, folder: Path, **settings: str
) -> Iterator[dict[str, str]]:
    """The settings of services sharing one Redis (a key prefix of their own, removed
    after) and one SQLite archive in ``folder``, as replicas would; and ``settings``."""
    with redis_keys(redis_url, pytestconfig) as prefix:
        yield {
            "WANDER_REDIS_URL": redis_url,
            "WANDER_REDIS_PREFIX": prefix,
            "WANDER_DATABASE_URL": f"sqlite:///{folder / 'archive.db'}",
            **settings,
        }


def serve(python: Path, settings: dict[str, str]) -> ServiceProcess:
    """``wander serve`` with ``python`` (an interop venv's), started."""
    return ServiceProcess(settings, python=str(python), cwd=str(ROOT)).start()


def scripted_model(python: Path) -> ServiceProcess:
    """tests/scripted_model.py as an OpenAI-compatible endpoint, served by ``python`` (the
    verifiers venv's), started."""
    return ServiceProcess(
        {"PYTHONPATH": str(ROOT)}, ("tests.scripted_model:app",), "/v1/models",
        python=str(python), cwd=str(ROOT), module="uvicorn",
    ).start()  # fmt: skip


def create(service: ServiceProcess, env: str, **body: Any) -> dict[str, Any]:
    """A new episode of ``env`` (``body``: the request's other fields)."""
    response = httpx.post(f"{service.url}/v1/episodes", json={"env": env, **body}, timeout=TIMEOUT)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()["episodes"][0]
    return created


def step(
    service: ServiceProcess, episode_id: str, turn: int, reply: str | dict[str, Any]
) -> httpx.Response:
    """Step ``reply``: the model's text, or its whole message (tool calls)."""
    action = {"role": "assistant", "content": reply} if isinstance(reply, str) else reply
    return httpx.post(
        f"{service.url}/v1/episodes/{episode_id}/step",
        json={"turn": turn, "action": action},
        timeout=TIMEOUT,
    )


def record(service: ServiceProcess, episode_id: str) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/v1/episodes/{episode_id}", timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def hosted_steps(service: ServiceProcess, env: str) -> dict[str, float]:
    """``wander_hosted_steps_total`` of ``env``, by where the episode was."""
    text = httpx.get(f"{service.url}/metrics", timeout=TIMEOUT).text
    return {
        sample.labels["episode"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "wander_hosted_steps_total" and sample.labels["env"] == env
    }
