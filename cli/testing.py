"""Helpers to run a real ``wander serve`` in tests and benchmarks (and the other
side of an interop check, from a venv of its own: `cached_venv`).

`RedisServers` and `RedisCluster` start ``redis-server`` on free local ports (a Redis
Cluster of three primaries, for the tests and ``bench/scaling.py`` alike), each server
keeping its files in a folder of its own, so that one killed starts again on its data.

`ServiceProcess` starts the command line in a session (and so a process group) of its
own, and stops it by signalling the whole group: ``wander serve --workers N`` is a
uvicorn supervisor and N worker processes, and signalling the supervisor alone would
leave its workers serving on the port. Stopping returns only once no process of the
group is running any more.

`light_client`, `FLOOD` and `oversized_rg_configs` are the load that tests and
benchmarks put on a service alike: the tests assert what it gets, ``bench.timings``
measures how long.

Only the standard library and httpx: ``wander`` is the base install's package too, and
importing this module must not pull in the service. (The Redis helpers import redis-py,
the service extra's client, when they first talk to a server, and `oversized_rg_configs`
reasoning-gym.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

import httpx

__all__ = [
    "FLOOD",
    "NO_DISK",
    "RedisCluster",
    "RedisServers",
    "RunningProcess",
    "ServiceProcess",
    "VenvInstallError",
    "cached_venv",
    "free_port",
    "light_client",
    "oversized_rg_configs",
    "running_processes",
    "wait_until",
]

PROC = Path("/proc")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NO_DISK = ("--save", "", "--appendonly", "no")
"""``redis-server`` options that keep nothing on disk: for a server that lives and dies
with one test session or one benchmark."""


def wait_until(check: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Poll ``check()`` until it is true (a Redis error counts as not yet: a server still
    starting, or still loading its files); raise, naming ``what``, past ``timeout``."""
    import redis

    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(redis.RedisError):
            if check():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)


def _client(port: int) -> Any:
    import redis

    return redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=2)


class RedisServers:
    """``redis-server`` processes on local ports, each keeping its files in a folder of its
    own in ``directory`` (named after its port), so that one killed starts again on them.
    ``FileNotFoundError`` when no ``redis-server`` is installed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._commands: dict[int, list[str]] = {}
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, port: int, options: Sequence[str] = (), config: str = "") -> None:
        """Start a server on ``port`` with ``options`` (``config``, a file's text, first:
        as Sentinel needs), and wait until it answers."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("no redis-server installed")
        folder = self.directory / str(port)
        folder.mkdir()
        command = [binary]
        if config:
            (folder / "redis.conf").write_text(config)
            command.append(str(folder / "redis.conf"))
        command += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), *options]
        self._commands[port] = command
        self.restart(port)

    def restart(self, port: int, timeout: float = 20.0) -> None:
        """Start the server of ``port`` again, on its files as it left them, and wait until
        it answers (having loaded them)."""
        self._processes[port] = process = subprocess.Popen(
            self._commands[port], stdout=subprocess.DEVNULL
        )
        with _client(port) as client:

            def answers() -> bool:  # this server, not another that took the port before it
                ours = not PROC.is_dir() or _listens(port, [process.pid])
                return bool(client.ping()) and (ours or process.poll() is not None)

            wait_until(answers, f"redis-server on {port} did not answer", timeout)
        if process.poll() is not None:
            raise RuntimeError(f"redis-server on {port} exited: another process took the port")

    def kill(self, port: int) -> None:
        """``kill -9`` the server of ``port``: it keeps only what its persistence wrote."""
        process = self._processes.pop(port)
        process.kill()
        process.wait()

    def stop(self) -> None:
        """Stop every server (SIGTERM), waiting until each has ended."""
        processes = list(self._processes.values())
        self._processes.clear()
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


class RedisCluster:
    """A Redis Cluster of ``primaries`` primaries and no replicas on free local ports,
    every slot served, its servers' files (``nodes.conf`` too) in ``directory``.
    ``options`` are every server's (say, an append-only file). A context manager: started
    on entering, stopped on leaving. ``FileNotFoundError`` when no ``redis-server``, or
    no ``redis-cli`` to create the cluster, is installed."""

    def __init__(
        self, directory: Path, primaries: int = 3, options: Sequence[str] = NO_DISK
    ) -> None:
        self.servers = RedisServers(directory)
        self.ports = [free_port() for _ in range(primaries)]
        self.options = list(options)
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)
        """What ``WANDER_REDIS_URL`` takes."""

    def start(self, timeout: float = 20.0) -> RedisCluster:
        try:
            for port in self.ports:  # the bus on a free port: port + 10000 may be taken
                bus = ["--cluster-port", str(free_port())]
                self.servers.start(port, ["--cluster-enabled", "yes", *bus, *self.options])
            cli = shutil.which("redis-cli")
            if cli is None:
                raise FileNotFoundError("no redis-cli installed")
            nodes = [f"127.0.0.1:{port}" for port in self.ports]
            created = subprocess.run(
                [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create: {created.stdout}{created.stderr}")
            self._wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, port: int) -> None:
        """``kill -9`` the primary on ``port``: its slots are served by nobody until
        `restart`."""
        self.servers.kill(port)

    def restart(self, port: int, timeout: float = 20.0) -> None:
        """Start the primary on ``port`` again, on its data and ``nodes.conf``: it rejoins
        the cluster with its slots; returns once every node says the cluster is ok."""
        self.servers.restart(port, timeout)
        self._wait_ok(timeout)

    def _wait_ok(self, timeout: float) -> None:
        for port in self.ports:
            with _client(port) as client:
                wait_until(
                    lambda client=client: client.cluster("info")["cluster_state"] == "ok",
                    f"the cluster node on {port} was not ok",
                    timeout,
                )

    def stop(self) -> None:
        self.servers.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class RunningProcess(NamedTuple):
    """One live process, as ``/proc`` describes it."""

    pid: int
    ppid: int
    pgid: int
    command: str


def running_processes() -> list[RunningProcess]:
    """Every process of the machine that is still running (zombies, which hold nothing
    but their pid until their parent reaps them, are left out). Linux only: it reads
    ``/proc``."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended while we looked
            continue
        # "pid (name) state ppid pgrp ...": the name may hold spaces and parentheses.
        state, ppid, pgid = stat.rsplit(")", 1)[1].split()[:3]
        if state not in ("Z", "X"):
            found.append(RunningProcess(int(entry.name), int(ppid), int(pgid), command.strip()))
    return found


class VenvInstallError(RuntimeError):
    """pip could not install a `cached_venv`'s packages; the message is pip's stderr."""


def cached_venv(
    home: Path, packages: Sequence[str], constraints: Path, unwanted: Sequence[str] = ()
) -> Path:
    """The ``python`` of a venv at ``home`` holding ``packages`` (pip arguments), less
    the ``unwanted`` distributions they pulled in, built on first use and kept: a
    ``.complete`` marker says the install finished, so a build cut short is started
    again rather than used half-done."""
    python = home / "bin" / "python"
    if (home / ".complete").exists():
        return python
    shutil.rmtree(home, ignore_errors=True)
    venv.create(home, with_pip=True)
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "-c", constraints, *packages],
        capture_output=True,
        text=True,
    )
    if install.returncode == 0 and unwanted:
        remove = [python, "-m", "pip", "uninstall", "--yes", "--quiet", *unwanted]
        install = subprocess.run(remove, capture_output=True, text=True)
    if install.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        raise VenvInstallError(install.stderr)
    (home / ".complete").touch()
    return python


class ServiceProcess:
    """One ``wander serve`` (or ``wander policy serve``) process group on a port of its
    own (or ``host`` and ``port`` as given); ``module`` runs another server the same way
    (``python -m uvicorn app:app``)."""

    def __init__(
        self,
        env: dict[str, str],
        command: tuple[str, ...] = ("serve",),
        health: str = "/healthz",
        *,
        python: str = sys.executable,
        cwd: str | None = None,
        module: str = "wander",
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        self.env = {**os.environ, **env}
        self.command, self.health = command, health
        self.python, self.cwd, self.module = python, cwd, module
        self.host, self.port = host, free_port() if port is None else port
        self._port_given = port is not None
        self.url = f"http://{host}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def start(self, timeout: float = 60.0, tries: int = 3) -> ServiceProcess:
        """Start it and wait until ``health`` answers 200 from this process group; stops
        it again and raises, with what it wrote to stderr, if it exits or stays silent.

        A port from `free_port` is free when picked, not when the service binds it a
        second later: another test's server may take it first. Then the answer on the
        port is that server's (a service with API keys answering 401), so an answer only
        counts once this group holds the listening socket, and a service whose port was
        taken starts again on another one (``tries`` in all; ``url`` changes)."""
        for _ in range(tries):
            if self._start(timeout):
                return self
            self.port = free_port()
            self.url = f"http://{self.host}:{self.port}"
        raise RuntimeError(f"{self.module} {self.command[0]}: other processes took {tries} ports")

    def _start(self, timeout: float) -> bool:
        """One try of `start`: False when another process took the port it picked."""
        # A file, not a pipe: nobody reads stderr while the service runs, and a full
        # pipe would block a service that logs every request. Kept until it stops: logs().
        self._stderr = stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _end)
        self.process = process = subprocess.Popen(
            [self.python, "-m", self.module, *self.command, *self._address()],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not (self._answers() and _group_listens(process.pid, self.port)):
            status = process.poll()
            if status is not None or time.monotonic() > deadline:
                written = self.logs()
                self.kill()
                if status is not None and not self._port_given and _listening_sockets(self.port):
                    return False
                what = "did not answer" if status is None else f"exited with {status}"
                raise RuntimeError(
                    f"{self.module} {self.command[0]} on port {self.port} {what}: {written}"
                )
            time.sleep(0.1)
        return True

    def _address(self) -> list[str]:
        """``--port``, and ``--host`` for an address other than the default 127.0.0.1: two
        services may then share a port on two loopback addresses, as replicas behind a
        proxy share one on their containers' addresses (tests/test_nginx.py)."""
        host = [] if self.host == "127.0.0.1" else ["--host", self.host]
        return [*host, "--port", str(self.port)]

    def logs(self) -> str:
        """What the service has written to stderr (its log) since it started."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}{self.health}", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down gracefully (SIGTERM, as a process manager would), then ``kill -9``
        whatever is still running after ``timeout`` seconds."""
        self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """``kill -9`` every process of the service: no shutdown, nothing flushed."""
        self._end(signal.SIGKILL, None)

    def _end(self, first: signal.Signals, grace: float | None) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid  # a session leader's pid is its group's id
        _signal_group(group, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
        _signal_group(group, signal.SIGKILL)  # whatever outlived the first signal
        process.wait()
        _wait_until_gone(group)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # every process of the group has ended
        os.killpg(group, sig)


def _wait_until_gone(group: int, timeout: float = 10.0) -> None:
    """Wait until no process of ``group`` runs: the supervisor's workers end a moment
    after it does, and until then they may still hold the port."""
    deadline = time.monotonic() + timeout
    while _group_runs(group):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of group {group} still run after SIGKILL")
        time.sleep(0.01)


def _listening_sockets(port: int) -> set[str]:
    """The sockets listening on TCP ``port`` (any address), as ``/proc/PID/fd`` links
    name them (``socket:[INODE]``)."""
    sockets = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):  # no IPv6
            for line in (PROC / "net" / table).read_text().splitlines()[1:]:
                fields = line.split()  # sl local_address rem_address st ... uid timeout inode
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    sockets.add(f"socket:[{fields[9]}]")
    return sockets


def _group_listens(group: int, port: int) -> bool:
    """Whether a process of ``group`` holds a socket listening on ``port``. Without
    ``/proc`` (not Linux), whether the group still runs: the answer may then be
    another server's."""
    if not PROC.is_dir():
        return _group_runs(group)
    return _listens(port, [p.pid for p in running_processes() if p.pgid == group])


def _listens(port: int, pids: Iterable[int]) -> bool:
    """Whether one of ``pids`` holds a socket listening on ``port`` (Linux: ``/proc``)."""
    sockets = _listening_sockets(port)
    for pid in pids:
        with contextlib.suppress(OSError):  # it ended while we looked
            for fd in (PROC / str(pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in sockets:
                        return True
    return False


def _group_runs(group: int) -> bool:
    if PROC.is_dir():
        return any(p.pgid == group for p in running_processes())
    try:  # without /proc: a group whose processes all ended but are not reaped yet counts
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


async def light_client(client: httpx.AsyncClient, stop: asyncio.Event) -> list[float]:
    """Tic-tac-toe games, step after step, until ``stop``: each request's latency. Every
    answer must be a 200 (or the 409 of a game that ended): an ``AssertionError`` if not."""
    latencies = []
    while not stop.is_set():
        started = time.perf_counter()
        created = await client.post("/v1/episodes", json={"env": "tictactoe"})
        latencies.append(time.perf_counter() - started)
        assert created.status_code == 201, created.text
        episode = created.json()["episodes"][0]
        for cell in range(9):
            if stop.is_set():
                break
            started = time.perf_counter()
            step = await client.post(
                f"/v1/episodes/{episode['id']}/step", json={"action": f"<move>{cell}</move>"}
            )
            latencies.append(time.perf_counter() - started)
            assert step.status_code in (200, 409), step.text
            if step.status_code == 409 or step.json()["done"]:
                break
    return latencies


FLOOD = """
# Four loops of requests as fast as the service answers, each pausing 20 ms: ten times a
# key limited to 20 a second, and not so fast that the flood's own process takes the
# machine's 2 cores. Arguments: the service's URL, the key, seconds; prints the 200s and
# the 429s.
import asyncio, sys, time, httpx
async def main(url, key, seconds):
    counts = {}
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}) as api:
        print("flooding", flush=True)
        async def loop():
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                status = (await api.get("/v1/environments/tictactoe")).status_code
                counts[status] = counts.get(status, 0) + 1
                await asyncio.sleep(0.02)
        await asyncio.gather(*(loop() for _ in range(4)))
    print(counts.get(200, 0), counts.get(429, 0))
asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""
"""A flood of requests, as a script for ``python -c`` (a process of its own)."""


def oversized_rg_configs() -> list[tuple[str, dict[str, Any]]]:
    """Every reasoning-gym dataset with its numeric option of largest default x1000, and
    two split sizes of ``10**7``: configs past their bounds, as an attacker sends them."""
    from reasoning_gym.factory import DATASETS

    attacks = []
    for dataset, (_, config_class) in sorted(DATASETS.items()):
        numbers = {
            f.name: f.default
            for f in dataclasses.fields(config_class)
            if f.name not in ("seed", "size")
            and isinstance(f.default, int | float)
            and not isinstance(f.default, bool)
        }
        if numbers:
            option, value = max(numbers.items(), key=lambda item: abs(item[1]))
            attacks.append((dataset, {"options": {option: (value or 1) * 1000}}))
    return [*attacks, ("acre", {"train_size": 10**7}), ("list_functions", {"train_size": 10**7})]
