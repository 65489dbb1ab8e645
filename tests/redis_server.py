"""A redis-server of a test's own, that the test may kill and start again on its data."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis

from wander.testing import free_port


class RedisServer:
    """``redis-server`` on a free port, keeping its files in ``directory`` with the
    persistence ``options`` (e.g. ``--appendonly yes``). Skips the test when no
    ``redis-server`` is installed."""

    def __init__(self, directory: Path, options: Sequence[str]) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("no redis-server to start")
        self.command = [binary, "--bind", "127.0.0.1", "--dir", str(directory), *options]
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start it, on the same port and files as before, and wait until it answers
        (having loaded what it kept)."""
        self._process = subprocess.Popen(
            [*self.command, "--port", str(self.port)], stdout=subprocess.DEVNULL
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError as exc:  # not listening yet, or still loading
                    if time.monotonic() > deadline:
                        self.kill()
                        raise RuntimeError(f"redis-server on {self.port} never answered") from exc
                    time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """``kill -9``: Redis keeps only what its persistence already wrote."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def _end(self, sig: signal.Signals) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.send_signal(sig)
            process.wait()
