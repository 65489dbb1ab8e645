"""A redis-server of a test's own, that the test may kill and start again on its data."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from wander.testing import RedisServers, free_port


class RedisServer:
    """``redis-server`` on a free port, keeping its files in ``directory`` with the
    persistence ``options`` (e.g. ``--appendonly yes``): one of
    :class:`wander.testing.RedisServers`, under one name. Skips the test when no
    ``redis-server`` is installed."""

    def __init__(self, directory: Path, options: Sequence[str]) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("no redis-server to start")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._options = options
        self._servers = RedisServers(directory)
        self._started = False

    def start(self) -> RedisServer:
        """Start it, on the same port and files as before, and wait until it answers
        (having loaded what it kept)."""
        if self._started:
            self._servers.restart(self.port)
        else:
            self._servers.start(self.port, self._options)
            self._started = True
        return self

    def kill(self) -> None:
        """``kill -9``: Redis keeps only what its persistence already wrote."""
        self._servers.kill(self.port)

    def stop(self) -> None:
        self._servers.stop()
