"""A test's server is the one it started, even when another server takes its port.

`free_port` picks a port that is free when picked; a second later, when ``wander serve``
or ``redis-server`` binds it, another test's server may hold it, and that server's
answers (401 from a service with API keys) would pass for this one's. CI failed that way
once: five tests of one module got another module's keyed service.
"""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from wander.testing import RedisServers, ServiceProcess, free_port


class Impostor(BaseHTTPRequestHandler):
    """A server that is healthy, but is nobody's service: every route but /healthz is 401."""

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 401)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def unstarted(tmp_path: Path, port: int | None = None) -> ServiceProcess:
    env = {"WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/archive.db", "WANDER_REDIS_URL": ""}
    return ServiceProcess(env, port=port)


def take_port(port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Impostor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def release(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def test_a_service_whose_port_was_taken_starts_on_another(tmp_path: Path) -> None:
    service = unstarted(tmp_path)
    taken = service.port
    impostor = take_port(taken)
    try:
        service.start()
        try:
            assert service.port != taken and service.url.endswith(f":{service.port}")
            response = httpx.get(f"{service.url}/v1/environments/tictactoe")
            assert response.status_code == 200, response.text  # ours: open, not the 401s
        finally:
            service.stop()
    finally:
        release(impostor)


def test_a_service_on_a_port_it_was_given_says_the_port_is_taken(tmp_path: Path) -> None:
    port = free_port()
    impostor = take_port(port)
    given = unstarted(tmp_path, port=port)
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exited with \d+: .*address already in use"):
            given.start()
        assert given.process is None  # stopped: nothing left behind
    finally:
        release(impostor)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server installed")
def test_a_redis_server_whose_port_was_taken_says_so(tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, second = RedisServers(tmp_path / "first"), RedisServers(tmp_path / "second")
    port = free_port()
    first.start(port)
    try:
        with pytest.raises(RuntimeError, match=f"redis-server on {port} exited: another process"):
            second.start(port)  # the first answers its pings
    finally:
        second.stop()
        first.stop()
