"""The pool of environment worker processes, driven from the event loop.

Workers are started on demand (the first isolated call, not the service's start: a
service that only plays inline environments never pays for them), at most
``env_workers`` at a time, and reused. Each call is a frame written to a worker's
stdin and a frame read from its stdout, awaited on the event loop: the loop is never
blocked, however long the environment takes. Past the deadline the worker is
killed (SIGKILL: nothing inside can refuse it) and the call fails with
``env_timeout``; a worker that dies fails its call with ``env_failed``. Either way
the worker is gone, and the next call starts a fresh one. An environment that raises
fails its call with ``env_error``; its worker goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from wander.service.errors import EnvBusy, EnvError, EnvFailed, EnvTimeout
from wander.service.sandbox.confine import Limits
from wander.service.sandbox.frames import HEADER, MAX_FRAME_BYTES, frame

log = logging.getLogger(__name__)

STARTUP_SECONDS = 120.0
"""How long a new worker may take to import the environments (about 2 s here)."""
PASSED_VARIABLES = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TZ")
"""All a worker inherits of the service's environment: nothing that may hold a secret."""
NAME_CHARS = 100
"""The most of an exception's class name, as a worker reports it, that an answer carries."""


def worker_environment(directory: Path) -> dict[str, str]:
    """A worker's whole environment: a few harmless variables, single-threaded maths
    libraries (threads count as processes under RLIMIT_NPROC), and its own directory as
    home and temp."""
    passed = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    home = str(directory)
    return {**passed, **threads, "HOME": home, "TMPDIR": home, "PYTHONDONTWRITEBYTECODE": "1"}


class WorkerProcess:
    """One worker: its process and its private directory."""

    def __init__(self, process: asyncio.subprocess.Process, directory: Path) -> None:
        self.process, self.directory = process, directory

    @classmethod
    async def start(cls, limits: Limits) -> WorkerProcess:
        directory = Path(tempfile.mkdtemp(prefix="wander-env-"))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wander.service.sandbox.worker",
            orjson.dumps(limits.to_dict()).decode(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=directory, env=worker_environment(directory),
        )  # fmt: skip
        worker = cls(process, directory)
        try:
            hello = await asyncio.wait_for(worker.receive(), STARTUP_SECONDS)
        except BaseException:
            await worker.kill()
            raise
        if "ready" not in hello:
            await worker.kill()
            raise EnvFailed(f"an environment worker could not start: {hello.get('fatal')}")
        log.debug("environment worker %d started, confined by %s", process.pid, hello["ready"])
        return worker

    async def call(self, request: bytes) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(frame(request))
        await self.process.stdin.drain()
        return await self.receive()

    async def receive(self) -> dict[str, Any]:
        """The next frame; EOFError when the worker is gone or speaks out of turn."""
        assert self.process.stdout is not None
        try:
            header = await self.process.stdout.readexactly(HEADER)
            size = int.from_bytes(header, "big")
            if size > MAX_FRAME_BYTES:
                raise EOFError(f"the worker sent a frame of {size} bytes")
            reply = orjson.loads(await self.process.stdout.readexactly(size))
        except (asyncio.IncompleteReadError, orjson.JSONDecodeError) as exc:
            raise EOFError(str(exc)) from None
        if not isinstance(reply, dict):
            raise EOFError("the worker sent something other than an object")
        return reply

    async def kill(self) -> None:
        """SIGKILL, reap, and remove its directory."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


class WorkerPool:
    """Runs calls in at most ``size`` workers, each call under ``deadline`` seconds, after
    waiting at most ``wait`` seconds for a free worker."""

    def __init__(self, size: int, deadline: float, memory_bytes: int, wait: float) -> None:
        self.deadline, self.wait = deadline, wait
        self.limits = Limits(
            memory_bytes=memory_bytes, cpu_seconds=int(600 + 2 * deadline), parent=os.getpid()
        )
        self._slots = asyncio.Semaphore(size)
        self._idle: list[WorkerProcess] = []
        self._workers: set[WorkerProcess] = set()
        self._closed = False

    async def call(self, request: dict[str, Any]) -> Any:
        """The worker's result for ``request``; raises ``env_busy`` (no worker came free
        in time), ``env_timeout``, ``env_failed``, or ``env_error`` (the environment
        raised: its text is logged, not answered)."""
        body = orjson.dumps(request)
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait)
        except TimeoutError:
            raise EnvBusy(
                f"every environment worker stayed busy for {self.wait:g} s; try again"
            ) from None
        try:
            reply = await self._run(body, request["env"])
        finally:
            self._slots.release()
        if "error" in reply:
            log.warning("the environment %r raised: %r", request["env"], reply["error"])
            raised = str(reply.get("raised", "an exception"))[:NAME_CHARS]
            raise EnvError(
                f"the environment {request['env']!r} raised {raised} during the call; "
                "nothing was applied",
                {"exception": raised},
            )
        return reply["ok"]

    async def _run(self, body: bytes, env: str) -> dict[str, Any]:
        """One call in a worker that holds a slot: its reply, or the sandbox's error."""
        worker = await self._acquire()
        try:
            reply = await asyncio.wait_for(worker.call(body), self.deadline)
        except TimeoutError:
            await self._discard(worker)
            raise EnvTimeout(
                f"the environment {env!r} took longer than {self.deadline:g} s; "
                "its worker was stopped"
            ) from None
        except (EOFError, ConnectionError) as exc:
            await self._discard(worker)
            raise EnvFailed(
                f"the environment {env!r} stopped during the call "
                f"(exit status {worker.process.returncode}): past its memory budget, or killed"
            ) from exc
        except BaseException:  # cancelled mid-call: the worker's next frame is stale
            await self._discard(worker)
            raise
        if reply.get("retire"):
            await self._discard(worker)
        else:
            self._idle.append(worker)
        return reply

    async def _acquire(self) -> WorkerProcess:
        if self._closed:
            raise EnvFailed("the service is stopping")
        if self._idle:
            return self._idle.pop()
        worker = await WorkerProcess.start(self.limits)
        self._workers.add(worker)
        return worker

    async def _discard(self, worker: WorkerProcess) -> None:
        self._workers.discard(worker)
        await worker.kill()

    async def aclose(self) -> None:
        """Stop every worker, busy or idle: none outlives the service."""
        self._closed = True
        workers, self._workers, self._idle = list(self._workers), set(), []
        await asyncio.gather(*(worker.kill() for worker in workers))
