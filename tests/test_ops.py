"""Operations: metrics, logs, workers, and the container files."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from opentelemetry import trace
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
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
    """Nobody finishes an episode that expires: the store counts it out (the
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


class SpanNames(trace.TracerProvider):
    """A configured tracer provider that records the name of every span started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _RecordingTracer(self.names)


class _RecordingTracer(trace.NoOpTracer):
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        self.names.append(name)
        return super().start_span(name, *args, **kwargs)


@pytest.mark.parametrize("store_kind", ["memory"])
@pytest.mark.parametrize("otel", [False, True])
async def test_requests_reach_a_configured_tracer_only_with_wander_otel(
    settings: Settings, otel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's native OpenTelemetry is off unless ``WANDER_OTEL``: its check at every
    request cost 6-8 µs of a step's HTTP layer (service/app.py)."""
    provider = SpanNames()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    async with service(settings.model_copy(update={"otel": otel})) as (_, api):
        assert (await api.get("/healthz")).status_code == 200
        await create(api)
    server_spans = [name for name in provider.names if name in ("GET", "POST")]
    assert server_spans == (["GET", "POST"] if otel else [])


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


def test_the_image_installs_the_locked_versions_of_every_service_requirement() -> None:
    """deploy/service.lock pins each package the service extra needs, at a version
    pyproject.toml allows (after a dependency changes, `make lock` brings it up to date),
    and the Dockerfile installs under it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(text) for text in project["dependencies"]]
    wanted += [
        Requirement(text)
        for text in project["optional-dependencies"]["service"]
        if not text.startswith("wander-rl")
    ]
    pinned = {}
    for line in (ROOT / "deploy/service.lock").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split(";")[0].strip().split("==")
            pinned[canonicalize_name(name)] = version
    for requirement in wanted:
        version = pinned.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not in deploy/service.lock"
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
    assert (
        'pip install --no-cache-dir -c deploy/service.lock ".[service]"'
        in (ROOT / "Dockerfile").read_text()
    )


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


def test_compose_restarts_what_stops_and_takes_the_database_password(compose: list[str]) -> None:
    services = rendered(compose, "compose.yaml", POSTGRES_PASSWORD="s3cret")["services"]
    for name in ("redis", "postgres", "service", "proxy"):
        assert services[name]["restart"] == "unless-stopped", name
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "s3cret"
    for name in ("migrate", "service"):
        url = services[name]["environment"]["WANDER_DATABASE_URL"]
        assert url == "postgresql+psycopg://wander:s3cret@postgres:5432/wander", name
    default = rendered(compose, "compose.yaml")["services"]["postgres"]["environment"]
    assert default["POSTGRES_PASSWORD"] == "wander"


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
    """Without certificates, ``docker compose up`` serves port 8000 to this machine
    only (an open API published on every interface was the default). ``compose.tls.yaml``
    adds 443 for other machines, keyed unless WANDER_AUTH says otherwise, and mounts the
    TLS server and the certificates."""
    keys = {"WANDER_API_KEYS": "lab:trainer:wdr_k", "WANDER_API_KEY": "wdr_k"}
    plain = rendered(compose, "compose.yaml", **keys)["services"]
    assert ports(plain["proxy"]) == {("127.0.0.1", "8000", "8000")}
    assert plain["service"]["environment"]["WANDER_AUTH"] in ("", None)  # keys: from the list
    opened = rendered(compose, "compose.yaml", WANDER_HTTP_PORT="8000")["services"]["proxy"]
    assert ports(opened) == {(None, "8000", "8000")}
    assert "/etc/nginx/wander.d/tls.conf" not in mounts(plain["proxy"])
    assert plain["service"]["environment"]["WANDER_API_KEYS"] == "lab:trainer:wdr_k"
    # Keys made with `wander keys create` in the stack need WANDER_AUTH=keys to be required.
    keyed = rendered(compose, "compose.yaml", WANDER_AUTH="keys")["services"]["service"]
    assert keyed["environment"]["WANDER_AUTH"] == "keys"
    assert plain["service"]["environment"]["FORWARDED_ALLOW_IPS"] == "*"
    tls = rendered(compose, "compose.yaml", "compose.tls.yaml", WANDER_TLS_DIR="/srv/certs")
    proxy = tls["services"]["proxy"]
    assert ports(proxy) == {("127.0.0.1", "8000", "8000"), (None, "443", "443")}
    assert tls["services"]["service"]["environment"]["WANDER_AUTH"] == "keys"
    assert tls["services"]["migrate"]["environment"]["WANDER_AUTH"] == "keys"
    assert mounts(proxy)["/etc/nginx/tls"] == "/srv/certs"
    assert mounts(proxy)["/etc/nginx/wander.d/tls.conf"] == str(ROOT / "deploy/nginx-tls.conf")
    local = rendered(compose, "compose.yaml", "compose.tls.yaml", WANDER_HTTP_PORT="127.0.0.1:8000")
    assert ports(local["services"]["proxy"]) == {
        ("127.0.0.1", "8000", "8000"),
        (None, "443", "443"),
    }


def test_the_compose_service_scales_behind_the_proxy(compose: list[str]) -> None:
    """``docker compose up --scale service=N``: N replicas can only start if none claims
    a fixed name or host port; the proxy, the one way in, waits for a healthy replica
    and finds every replica by the service's name on Docker's DNS, asked again every few
    seconds (tests/test_nginx.py runs that config against two replicas)."""
    services = rendered(compose, "compose.yaml")["services"]
    service, proxy = services["service"], services["proxy"]
    assert "container_name" not in service and "ports" not in service
    assert service["environment"]["WANDER_REDIS_URL"] == "redis://redis:6379/0"  # shared
    assert proxy["depends_on"]["service"] == {"condition": "service_healthy"}
    stages = (ROOT / "Dockerfile").read_text().split("\nFROM ")
    assert any(" AS service\n" in stage and "\nHEALTHCHECK " in stage for stage in stages)
    assert mounts(proxy)["/etc/nginx/nginx.conf"] == str(ROOT / "deploy/nginx.conf")
    for config in ("nginx.conf", "nginx-tls.conf"):
        text = (ROOT / "deploy" / config).read_text()
        # A variable in proxy_pass makes nginx resolve the name per request, not once.
        assert "set $upstream http://service:8000;\n" in text and "proxy_pass $upstream;" in text
    assert "resolver 127.0.0.11 valid=5s;" in (ROOT / "deploy/nginx.conf").read_text()


def test_the_gpu_trainer_gets_the_key(compose: list[str]) -> None:
    services = rendered(compose, "compose.yaml", profile="gpu", WANDER_API_KEY="wdr_trainer")
    assert services["services"]["trainer"]["environment"]["WANDER_API_KEY"] == "wdr_trainer"


def options(command: list[str]) -> dict[str, str]:
    """The ``--name=value`` options of a command line, by name."""
    return dict(part.split("=", 1) for part in command if part.startswith("--") and "=" in part)


def read_only(service: dict[str, Any], target: str) -> bool:
    """Whether the bind mount on ``target`` is read-only, as compose v1 or v2 writes it."""
    for volume in service.get("volumes", []):
        if isinstance(volume, str) and volume.split(":")[1] == target:
            return volume.endswith(":ro")
        if isinstance(volume, dict) and volume["target"] == target:
            return bool(volume.get("read_only"))
    raise AssertionError(f"nothing is mounted on {target}")


def stage(dockerfile: str, name: str) -> str:
    """The lines of one stage of a Dockerfile (``FROM ... AS name`` to the next FROM)."""
    return dockerfile.split(f" AS {name}\n")[1].split("\nFROM ")[0]


def test_the_gpu_profile_trains_the_model_vllm_serves(compose: list[str]) -> None:
    """``docker compose --profile gpu up``: vLLM serves the model the trainer trains
    (one MODEL for both; by default the stage 1 config's), with the flags TRL's weight
    sync needs; the trainer reaches vLLM and Wander by their service names, from an
    image holding vLLM's client at the server's version, on a GPU of its own, and
    writes to ./runs as its non-root user."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    from wander.trainer.config import load_config
    from wander.trainer.vllm_server import SERVE_FLAGS

    default = rendered(compose, "compose.yaml", profile="gpu")["services"]
    stage2 = rendered(
        compose, "compose.yaml", profile="gpu", MODEL="runs/grpo-stage1", CONFIG="stage2.toml"
    )["services"]
    first = load_config(ROOT / "trainer" / "configs" / "stage1.toml").model
    for services, model, config in (
        (default, first, "stage1.toml"),
        (stage2, "runs/grpo-stage1", "stage2.toml"),
    ):
        vllm, trainer = services["vllm"], services["trainer"]
        assert vllm["entrypoint"] == ["vllm", "serve"] and vllm["command"][0] == model
        assert options(trainer["command"])["--model"] == model
        assert options(trainer["command"])["--config"] == f"/configs/{config}"

    vllm, trainer, runs = default["vllm"], default["trainer"], default["runs"]
    # The server TRL's weight sync talks to, on the port the trainer looks for it on.
    assert vllm["environment"]["VLLM_SERVER_DEV_MODE"] == "1"
    assert vllm["command"][1:3] == ["--port", "8001"]
    assert shlex.join(SERVE_FLAGS) in shlex.join(vllm["command"])
    assert "ports" not in vllm  # dev mode's endpoints stay inside the stack
    assert options(trainer["command"])["--vllm-url"] == "http://vllm:8001"
    assert options(trainer["command"])["--url"] == "http://proxy:8000"
    assert trainer["depends_on"]["vllm"]["condition"] == "service_healthy"
    assert "8001/health" in " ".join(vllm["healthcheck"]["test"])
    # vLLM's client in the trainer's image, at the server's version, one TRL supports.
    version = trainer["build"]["args"]["VLLM_VERSION"]
    assert vllm["image"] == f"vllm/vllm-openai:v{version}"
    [supported] = [
        requirement
        for requirement in map(Requirement, requires("trl") or [])
        if requirement.name == "vllm" and requirement.marker
        if requirement.marker.evaluate({"extra": "vllm"})
    ]
    assert supported.specifier.contains(version), (version, supported)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'pip install --no-cache-dir ".[trainer,vllm]" "vllm==${VLLM_VERSION}"' in stage(
        dockerfile, "trainer-build"
    )
    # Two GPUs: NCCL cannot put the trainer and vLLM's worker on one device.
    devices = [s["deploy"]["resources"]["reservations"]["devices"] for s in (vllm, trainer)]
    assert devices[0][0]["device_ids"] != devices[1][0]["device_ids"]
    # ./runs: the trainer's (uid 10001) to write, vLLM's to read (MODEL=runs/...), at
    # the same place relative to both working folders.
    assert "USER 10001" in stage(dockerfile, "trainer")
    assert "WORKDIR /home/wander" in stage(dockerfile, "trainer")
    assert vllm["working_dir"] == trainer["working_dir"] == "/home/wander"
    here = str(ROOT / "runs")
    for mounted in (vllm, trainer, runs):
        assert mounts(mounted)["/home/wander/runs"] == here
    assert read_only(vllm, "/home/wander/runs") and not read_only(trainer, "/home/wander/runs")
    assert runs["user"] == "root"
    assert runs["entrypoint"] == ["chown", "10001:10001", "/home/wander/runs"]
    assert trainer["depends_on"]["runs"]["condition"] == "service_completed_successfully"
