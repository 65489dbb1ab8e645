"""The HTTP edge of ``wander serve`` (service/http_edge.py), over raw sockets.

Before: no header cap (a 12 MB header was read in full), no header or body deadline
(2,200 half-sent requests and 20,000 partial-header sockets stayed open), no cap on
connections. Each case below held a connection open for ever, or read it all.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import plugin_service
from wander.testing import ServiceProcess

HEADER_TIMEOUT = 1.0
REQUEST_TIMEOUT = 2.0
KEEP_ALIVE = 1.0
MAX_CONNECTIONS = 24
WAIT = 15.0
"""How long a test waits for the service to close a connection before it fails."""


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """The service with short deadlines, and the test plugin (a step that runs long)."""
    with plugin_service(
        plugin_site, tmp_path_factory.mktemp("edge"),
        WANDER_ENV_CALL_SECONDS=str(REQUEST_TIMEOUT + 1),
        WANDER_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT),
        WANDER_REQUEST_TIMEOUT_SECONDS=str(REQUEST_TIMEOUT),
        WANDER_KEEP_ALIVE_SECONDS=str(KEEP_ALIVE),
        WANDER_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
    ) as process:  # fmt: skip
        yield process


def connect(service: ServiceProcess) -> socket.socket:
    sock = socket.create_connection((service.host, service.port), timeout=WAIT)
    return sock


def until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the service sends until it closes the connection, and how long it took
    (a ``socket.timeout`` after ``WAIT`` seconds: the service kept it open)."""
    started, received = time.monotonic(), b""
    with sock:
        while chunk := sock.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def status_and_code(response: bytes) -> tuple[int, str]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]["code"]


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: wander.test", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def send_until_refused(sock: socket.socket, chunks: Iterable[bytes], pause: float = 0) -> None:
    """Send ``chunks`` (``pause`` seconds apart) until they end or the service hangs up."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(pause)


def test_headers_past_the_cap_are_431_and_never_read_whole(service: ServiceProcess) -> None:
    sock = connect(service)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: wander.test\r\nX-Big: ")
    send_until_refused(sock, [b"a" * 65536] * (12 * 16))  # 12 MB: never read whole
    response, _ = until_closed(sock)
    assert status_and_code(response) == (431, "headers_too_large")


def test_headers_under_the_cap_are_served(service: ServiceProcess) -> None:
    sock = connect(service)
    sock.sendall(get("/healthz", "X-Big: " + "a" * 60_000, "Connection: close"))
    response, _ = until_closed(sock)
    assert response.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /healthz HTTP/1.1\r\nHost: wander", b"GET /healthz HTTP/1.1\r\nHost: w\r\n"],
    ids=["nothing", "half a header", "no blank line"],
)
def test_a_request_whose_headers_never_end_is_closed(service: ServiceProcess, sent: bytes) -> None:
    sock = connect(service)
    sock.sendall(sent)
    response, _ = until_closed(sock)
    assert status_and_code(response) == (408, "request_timeout")


def test_a_slow_body_is_closed(service: ServiceProcess) -> None:
    sock = connect(service)
    head = "POST /v1/episodes HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: 1000\r\n\r\n{{".encode())
    pause = 0.2  # a byte now and then, past the request's deadline
    send_until_refused(sock, [b" "] * int((REQUEST_TIMEOUT + 1) / pause), pause)
    response, _ = until_closed(sock)
    assert status_and_code(response) == (408, "request_timeout")


def test_an_idle_keep_alive_connection_is_closed_after_the_setting(
    service: ServiceProcess,
) -> None:
    sock = connect(service)
    sock.sendall(get("/healthz"))
    response, waited = until_closed(sock)
    assert response.startswith(b"HTTP/1.1 200")
    assert waited < KEEP_ALIVE + 3  # WANDER_KEEP_ALIVE_SECONDS, not uvicorn's own 5 s


async def test_an_answer_that_takes_longer_than_the_deadlines_is_not_cut(
    service: ServiceProcess,
) -> None:
    """The deadlines stop once a request has been read: a step whose environment runs
    past both (to its call deadline) still gets its answer."""
    async with httpx.AsyncClient(base_url=service.url, timeout=WAIT) as api:
        created = await api.post("/v1/episodes", json={"env": "hostile"})
        assert created.status_code == 201, created.text
        episode = created.json()["episodes"][0]["id"]
        response = await api.post(f"/v1/episodes/{episode}/step", json={"action": "spin"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "env_timeout"


def test_connections_past_the_cap_are_refused_at_once(service: ServiceProcess) -> None:
    held = [connect(service) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)
        extra = connect(service)
        response, waited = until_closed(extra)
        assert status_and_code(response) == (503, "server_busy")
        assert waited < HEADER_TIMEOUT  # refused, not left to time out
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(f"{service.url}/healthz").status_code == 200


def test_the_settings_are_documented() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    for name in ("WANDER_MAX_HEADER_BYTES", "WANDER_HEADER_TIMEOUT_SECONDS",
                 "WANDER_REQUEST_TIMEOUT_SECONDS", "WANDER_MAX_CONNECTIONS"):  # fmt: skip
        assert name in docs
