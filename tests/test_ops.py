"""Operations: metrics, logs, workers, and the container files."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.agents import answer
from tests.helpers import create, service, step
from wander.service.settings import Settings
from wander.testing import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_move_as_games_are_played(api: httpx.AsyncClient) -> None:
    before = (await api.get("/metrics")).text
    [episode] = await create(api, example=0, config={"max_turns": 2})
    await step(api, episode["id"], "no move here", 0)
    await step(api, episode["id"], answer(9), 1)
    [other] = await create(api, example=1)
    await api.delete(f"/v1/episodes/{other['id']}")
    after = (await api.get("/metrics")).text

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("wander_episodes_created_total", env="tictactoe") == 2
    assert moved("wander_episodes_finished_total", env="tictactoe", status="done") == 1
    assert moved("wander_episodes_finished_total", env="tictactoe", status="aborted") == 1
    assert moved("wander_live_episodes", env="tictactoe") == 0
    assert moved("wander_steps_total", env="tictactoe") == 2
    assert moved("wander_invalid_actions_total", env="tictactoe") == 2
    assert moved("wander_step_duration_seconds_count", env="tictactoe") == 2
    step_route = "/v1/episodes/{episode_id}/step"
    assert moved("wander_http_requests_total", route=step_route, method="POST", status="200") == 2
    assert moved("wander_http_request_duration_seconds_count", route=step_route, method="POST") == 2
    for name in (
        "wander_store_errors_total",
        "wander_database_errors_total",
        "wander_archive_backlog",
        "wander_archive_dead_letters",
    ):
        assert any(key[0] == name for key in samples(after)), name


async def test_error_answers_are_counted_by_code(api: httpx.AsyncClient) -> None:
    """What the console's Live page shows as errors by code."""
    before = (await api.get("/metrics")).text
    assert (await api.get("/v1/episodes/ep_nope")).status_code == 404
    [episode] = await create(api, example=0)
    assert (await api.post(f"/v1/episodes/{episode['id']}/step",
                           json={"action": answer(9), "turn": 5})).status_code == 409  # fmt: skip
    assert (await api.get("/v1/runs", params={"limit": 0})).status_code == 422
    after = (await api.get("/metrics")).text
    for code in ("episode_not_found", "turn_mismatch", "validation_error"):
        moved = value(after, "wander_errors_total", code=code)
        assert moved - value(before, "wander_errors_total", code=code) == 1, code


async def test_live_episodes_go_down_when_episodes_expire(settings: Settings) -> None:
    """Nobody finishes an episode that expires: the store counts it out (issue 20: the
    gauge used to keep it for ever)."""
    async with service(settings.model_copy(update={"episode_ttl_seconds": 1})) as (_, api):
        await create(api, example=0, n=3)
        [other] = await create(api, example=1)
        assert (await api.delete(f"/v1/episodes/{other['id']}")).status_code == 204
        live = value((await api.get("/metrics")).text, "wander_live_episodes", env="tictactoe")
        assert live == 3
        await asyncio.sleep(1.5)
        live = value((await api.get("/metrics")).text, "wander_live_episodes", env="tictactoe")
        assert live == 0


async def test_every_response_carries_a_request_id(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="wander.service.requests"):
        mine = await api.get("/healthz", headers={"X-Request-ID": "trace-123"})
        fresh = await api.get("/v1/episodes/ep_missing")
    assert mine.headers["x-request-id"] == "trace-123"
    assert len(fresh.headers["x-request-id"]) == 16 and fresh.status_code == 404
    records = [r for r in caplog.records if r.name == "wander.service.requests"]
    assert [(r.request_id, r.status, r.route) for r in records] == [
        ("trace-123", 200, "/healthz"),
        (fresh.headers["x-request-id"], 404, "/v1/episodes/{episode_id}"),
    ]


@pytest.fixture
def two_workers(redis_url: str, redis_prefix: str, tmp_path: Path) -> Iterator[ServiceProcess]:
    env = {
        "WANDER_REDIS_URL": redis_url,
        "WANDER_REDIS_PREFIX": redis_prefix,
        "WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/archive.db",
        "WANDER_LOG_LEVEL": "info",
    }
    process = ServiceProcess(env, command=("serve", "--workers", "2")).start()
    yield process
    process.stop()


def test_two_workers_serve_one_episode_alike(two_workers: ServiceProcess) -> None:
    body = {"env": "tictactoe", "example": 4, "config": {"max_turns": 64}}
    workers: set[str] = set()
    transcripts = []
    for _ in range(2):  # the same example twice, the same actions
        episode = httpx.post(f"{two_workers.url}/v1/episodes", json=body).json()["episodes"][0]
        transcript = []
        for turn in range(30):  # invalid moves keep the game going
            with httpx.Client() as fresh:  # a new connection each time: either worker may answer
                response = fresh.post(
                    f"{two_workers.url}/v1/episodes/{episode['id']}/step",
                    json={"action": f"bad {turn}", "turn": turn},
                )
            assert response.status_code == 200, response.text
            workers.add(response.headers["x-wander-worker"])
            transcript.append({k: v for k, v in response.json().items() if k != "episode_id"})
        transcripts.append(transcript)
    assert len(workers) == 2, "every step was served by the same worker"
    assert transcripts[0] == transcripts[1]


def test_the_dockerfile_passes_hadolint() -> None:
    linter = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run([linter, "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def compose() -> list[str]:
    """The docker compose client's command (v2's plugin, else v1's docker-compose)."""
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("no docker compose client on this machine: compose.yaml not validated")


def rendered(compose: list[str], *files: str, profile: str = "", **env: str) -> dict[str, Any]:
    """``docker compose config`` of ``files`` (with ``profile``) and ``env`` set, as data."""
    options = [option for name in files for option in ("-f", name)]
    options += ["--profile", profile] if profile else []
    done = subprocess.run(
        [*compose, *options, "config"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)  # type: ignore[no-any-return]


def test_compose_config_is_valid(compose: list[str]) -> None:
    result = subprocess.run(
        [*compose, "-f", "compose.yaml", "--profile", "gpu", "config", "-q"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rendered = subprocess.run(
        [*compose, "-f", "compose.yaml", "config"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert "service_completed_successfully" in rendered and "8000" in rendered
    assert "--appendonly" in rendered


def ports(service: dict[str, Any]) -> set[tuple[str | None, str, str]]:
    """(host address, published, target) of each port, as compose v1 or v2 writes them."""
    found = set()
    for port in service.get("ports", []):
        if isinstance(port, str):  # v1: "127.0.0.1:8000:8000/tcp"
            *address, published, target = port.split("/")[0].split(":")
            found.add((address[0] if address else None, published, target))
        else:
            found.add((port.get("host_ip"), str(port["published"]), str(port["target"])))
    return found


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Target -> source of each bind mount, as compose v1 or v2 writes them."""
    found = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):  # v1: "source:target:ro"
            source, target = volume.split(":")[:2]
            found[target] = source
        else:
            found[volume["target"]] = volume["source"]
    return found


def test_compose_serves_tls_only_with_its_overlay_and_passes_keys_on(compose: list[str]) -> None:
    """Without certificates, ``docker compose up`` is what it was: port 8000 and no
    443. ``compose.tls.yaml`` adds 443 and mounts the TLS server and the certificates."""
    keys = {"WANDER_API_KEYS": "lab:trainer:wdr_k", "WANDER_API_KEY": "wdr_k"}
    plain = rendered(compose, "compose.yaml", **keys)["services"]
    assert ports(plain["proxy"]) == {(None, "8000", "8000")}
    assert "/etc/nginx/wander.d/tls.conf" not in mounts(plain["proxy"])
    assert plain["service"]["environment"]["WANDER_API_KEYS"] == "lab:trainer:wdr_k"
    assert plain["service"]["environment"]["FORWARDED_ALLOW_IPS"] == "*"
    tls = rendered(compose, "compose.yaml", "compose.tls.yaml", WANDER_TLS_DIR="/srv/certs")
    proxy = tls["services"]["proxy"]
    assert ports(proxy) == {(None, "8000", "8000"), (None, "443", "443")}
    assert mounts(proxy)["/etc/nginx/tls"] == "/srv/certs"
    assert mounts(proxy)["/etc/nginx/wander.d/tls.conf"] == str(ROOT / "deploy/nginx-tls.conf")
    local = rendered(compose, "compose.yaml", "compose.tls.yaml", WANDER_HTTP_PORT="127.0.0.1:8000")
    assert ports(local["services"]["proxy"]) == {
        ("127.0.0.1", "8000", "8000"),
        (None, "443", "443"),
    }


def test_the_gpu_trainer_gets_the_key(compose: list[str]) -> None:
    services = rendered(compose, "compose.yaml", profile="gpu", WANDER_API_KEY="wdr_trainer")
    assert services["services"]["trainer"]["environment"]["WANDER_API_KEY"] == "wdr_trainer"
