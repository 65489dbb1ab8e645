"""Limits at the edge: bodies, content types and request ids."""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import create, service
from wander.service.settings import Settings
from wander.testing import ServiceProcess


def test_a_declared_300_mb_body_is_refused_unread(live: ServiceProcess) -> None:
    """Headers only: the service answers 413 and closes without waiting for the body (it
    is never sent: a service that waited for it would leave ``recv`` to time out).
    How long the answer takes: ``python -m bench.timings``."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as connection:
        connection.sendall(
            b"POST /v1/step HTTP/1.1\r\nHost: wander\r\nContent-Type: application/json\r\n"
            b"Content-Length: 300000000\r\n\r\n"
        )
        received = b""
        while chunk := connection.recv(4096):  # the service closes: it will not read the body
            received += chunk
        answer = received.decode()
    assert answer.startswith("HTTP/1.1 413"), answer
    assert '"code":"payload_too_large"' in answer.replace(" ", "")


@pytest.fixture
async def small_limit(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with service(settings.model_copy(update={"max_body_bytes": 1000})) as (_, api):
        yield api


async def chunks(total: int) -> AsyncIterator[bytes]:
    """A JSON body of ``total`` bytes, sent without a Content-Length (chunked)."""
    yield b'{"steps": [], "pad": "'
    yield b"x" * (total - 24)
    yield b'"}'


@pytest.mark.parametrize("path", ["/v1/step", "/v1/admin/dead-letters/retry"])
async def test_a_body_past_the_limit_is_cut_off_while_read(
    small_limit: httpx.AsyncClient, path: str
) -> None:
    """Hot routes and FastAPI's standard ones alike."""
    response = await small_limit.post(
        path, content=chunks(5000), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "payload_too_large"
    fits = await small_limit.post("/v1/step", json={"steps": []})
    assert fits.status_code == 200, fits.text


@pytest.mark.parametrize(
    ("content_type", "accepted"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("text/notjson", False),
        ("application/jsonp", False),
        ("text/plain; note=json", False),
        ("", False),
    ],
)
async def test_the_content_type_is_a_media_type(
    api: httpx.AsyncClient, content_type: str, accepted: bool
) -> None:
    response = await api.post(
        "/v1/episodes", content=b'{"env": "tictactoe"}', headers={"content-type": content_type}
    )
    assert response.status_code == (201 if accepted else 400), response.text


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("trainer-7.step:42", True), ("x" * 64, True), ("x" * 65, False),
     ('a"b', False), ("line\\nbreak", False), ("", False)],
)  # fmt: skip
async def test_a_client_request_id_is_kept_only_when_plain(
    api: httpx.AsyncClient, sent: str, kept: bool
) -> None:
    response = await api.get("/healthz", headers={"x-request-id": sent})
    assert (response.headers["x-request-id"] == sent) is kept
    assert len(response.headers["x-request-id"]) <= 64


async def test_creating_still_works(api: httpx.AsyncClient) -> None:
    assert len(await create(api, example=0)) == 1


def resident_bytes(pid: int) -> int:
    """The process's resident memory (VmRSS)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) * 1024  # type: ignore[index]


def test_a_streamed_300_mb_body_is_cut_off_and_memory_stays_flat(live: ServiceProcess) -> None:
    """No Content-Length to refuse it on: the body is read only up to the limit (16 MiB),
    so the service's memory does not follow the 300 MB a client pushes."""
    assert live.process is not None
    before = resident_bytes(live.process.pid)
    megabyte = b"x" * 2**20

    def body() -> Iterator[bytes]:
        yield b'{"steps": [], "pad": "'
        for _ in range(300):
            yield megabyte

    with contextlib.suppress(httpx.TransportError):  # it may close before we are done
        response = httpx.post(
            f"{live.url}/v1/step", content=body(), timeout=60,
            headers={"content-type": "application/json"},
        )  # fmt: skip
        assert response.status_code == 413, response.text
    grown = resident_bytes(live.process.pid) - before
    assert grown < 64 * 2**20, f"the service grew by {grown / 2**20:.0f} MiB"
    assert httpx.get(f"{live.url}/healthz").status_code == 200


def test_a_client_that_leaves_mid_body_is_one_log_line_not_a_500(live: ServiceProcess) -> None:
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as connection:
        connection.sendall(
            b"POST /v1/episodes HTTP/1.1\r\nHost: wander\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"env": '
        )
        time.sleep(0.2)  # the service is now waiting for the rest
    metrics = ""
    for _ in range(50):  # the service notices the closed connection a moment later
        metrics = httpx.get(f"{live.url}/metrics").text
        if 'route="/v1/episodes",status="499"' in metrics:
            break
        time.sleep(0.1)
    assert 'route="/v1/episodes",status="499"' in metrics
    assert 'route="/v1/episodes",status="500"' not in metrics
    logs = live.logs()
    assert [line for line in logs.splitlines() if "client left mid-body" in line]
    assert "Traceback" not in logs
    assert "internal_error" not in logs
