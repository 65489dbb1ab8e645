"""Real service processes (``python -m wander serve``) for multi-process tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    """One ``wander serve`` (or ``wander policy serve``) process on a port of its own."""

    def __init__(
        self,
        env: dict[str, str],
        command: tuple[str, ...] = ("serve",),
        health: str = "/healthz",
        *,
        python: str = sys.executable,
        cwd: str | None = None,
    ) -> None:
        self.env = {**os.environ, **env}
        self.command, self.health = command, health
        self.python, self.cwd = python, cwd
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> ServiceProcess:
        self.process = subprocess.Popen(
            [self.python, "-m", "wander", *self.command, "--port", str(self.port)],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"wander serve exited with {self.process.returncode}: {stderr}")
            try:
                if httpx.get(f"{self.url}{self.health}", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"wander serve did not answer on port {self.port}")
            time.sleep(0.1)

    def kill(self) -> None:
        """``kill -9``: no shutdown, nothing flushed."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.process is not None and self.process.stderr:
            self.process.stderr.close()
        self.process = None
