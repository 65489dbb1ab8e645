"""A Redis Cluster of three primaries, and a primary watched by a Sentinel, started from
``redis-server`` on free local ports, their files in a directory of their own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis

from wander.testing import free_port

NO_DISK = ["--save", "", "--appendonly", "no"]


def _binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server installed: the Redis Cluster and Sentinel tests are skipped")
    return binary


def _wait(check: object, what: str, timeout: float = 20.0) -> None:
    """Poll ``check()`` until it is true; fail the test, naming ``what``, past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)


class Servers:
    """``redis-server`` processes started in ``directory``, each in a folder of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, port: int, options: Sequence[str], config: str = "") -> None:
        """Start one on ``port``: ``config`` (a file's text) first, as Sentinel needs."""
        folder = self.directory / str(port)
        folder.mkdir()
        command = [_binary()]
        if config:
            (folder / "redis.conf").write_text(config)
            command.append(str(folder / "redis.conf"))
        command += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), *options]
        self.processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(10)
        self.processes.clear()


def start_cluster(servers: Servers, primaries: int = 3) -> str:
    """A cluster of ``primaries`` primaries and no replicas, all slots served: its
    ``redis+cluster://`` URL."""
    ports = [free_port() for _ in range(primaries)]
    for port in ports:  # the bus on a port of its own: port + 10000 may be taken, or past 65535
        bus = ["--cluster-port", str(free_port())]
        servers.start(port, ["--cluster-enabled", "yes", *bus, *NO_DISK])
    for port in ports:
        _wait(redis.Redis(port=port).ping, f"redis-server on {port} never answered")
    created = subprocess.run(
        ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{port}" for port in ports),
         "--cluster-replicas", "0", "--cluster-yes"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    for port in ports:
        _wait(
            lambda port=port: redis.Redis(port=port).cluster("info")["cluster_state"] == "ok",
            f"the cluster on {port} was never ok",
        )
    return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in ports)


def start_sentinel(servers: Servers, service: str = "wander") -> tuple[str, int]:
    """A primary and one Sentinel watching it as ``service``: the ``redis+sentinel://``
    URL, and the primary's port."""
    primary, sentinel = free_port(), free_port()
    servers.start(primary, NO_DISK)
    _wait(redis.Redis(port=primary).ping, f"redis-server on {primary} never answered")
    servers.start(
        sentinel, ["--sentinel"], config=f"sentinel monitor {service} 127.0.0.1 {primary} 1\n"
    )
    _wait(
        lambda: redis.Redis(port=sentinel).sentinel_get_master_addr_by_name(service),
        f"the Sentinel on {sentinel} never named its primary",
    )
    return f"redis+sentinel://127.0.0.1:{sentinel}/{service}", primary
