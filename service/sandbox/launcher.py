"""The service's side of the fork server: starting it, asking it for workers, and a
worker as the pool holds it. Everything here is awaited on the event loop, never blocks
it.

The fork server (``forkserver.py``) is a fresh interpreter started with the workers'
fixed environment (``worker_environment``: nothing that may hold a secret), its control
socket (``SOCK_SEQPACKET``: one message per request, per answer) passed as a
descriptor. It answers each fork request with the worker's pid and uid and two
descriptors (``SCM_RIGHTS``): the service's end of the worker's channel, read and
written here as an asyncio stream, and a pidfd of the worker, through which it is
killed: the fork server, not the service, is the worker's parent and reaps it, so its
pid may belong to another process by the time the service kills; the pidfd never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from wander.service.envs.hosted import HOSTED_VARIABLES
from wander.service.errors import EnvFailed
from wander.service.frames import HEADER, frame
from wander.service.sandbox.confine import NO_GRANTS, Grants, Limits

log = logging.getLogger(__name__)

STARTUP_SECONDS = 120.0
"""How long the fork server may take to import the environments (seconds), and a new
worker to confine itself (milliseconds): far more than either needs."""
PASSED_VARIABLES = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TZ", *HOSTED_VARIABLES)
"""All the fork server inherits of the service's environment: nothing that may hold a
secret (the hosted environments' settings name code to import)."""
MESSAGE_BYTES = 4096


def worker_environment(directory: Path) -> dict[str, str]:
    """The fork server's (so every worker's) whole environment: a few harmless variables,
    single-threaded maths libraries (threads count as processes under RLIMIT_NPROC, and
    a fork copies one thread), its own directory as home and temp, and the allocator
    that makes forks cheap (``FAST_FORKS``)."""
    passed = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    if "PYTHONPATH" in passed:  # the fork server runs in ``directory``: "." would be there
        paths = passed["PYTHONPATH"].split(os.pathsep)
        passed["PYTHONPATH"] = os.pathsep.join(os.path.abspath(path) for path in paths if path)
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    home = str(directory)
    return {**passed, **threads, **FAST_FORKS, "HOME": home, "TMPDIR": home,
            "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip


FAST_FORKS = {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
FOLDER_PREFIX = "wander-env-"
"""The fork server's temporary folder is ``wander-env-<the service's pid>-<random>``."""


def remove_orphaned_folders() -> None:
    """Remove the folders of fork servers whose service is gone: a service killed with
    ``kill -9`` takes its fork server with it (``PR_SET_PDEATHSIG``), and no one is left
    to remove their folder. A live service's folder is never touched."""
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*-*"):
        owner = folder.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)


"""Python's objects in glibc's heap, which glibc asks the kernel to back with huge pages
(transparent huge pages, ``madvise`` mode): a fork copies the page tables of the fork
server's heap, and a worker's exit drops them, and with 2 MB pages there are 512 times
fewer entries, so forks and exits are faster and the fork server sustains more workers
a second (bench/README.md, "Worker isolation", has the figures). A write to a huge page
in a worker still copies 4 KB (the kernel splits the mapping first). Where glibc or the
kernel does not offer it, nothing changes but the allocator."""


class FrameTooLarge(Exception):
    """A worker's reply declared a frame longer than the pool reads."""

    def __init__(self, size: int) -> None:
        super().__init__(f"a reply of {size} bytes")
        self.size = size


class WorkerProcess:
    """One worker, as the service holds it: its channel and its pidfd."""

    def __init__(self, server: ForkServer, pid: int, uid: int | None, pidfd: int,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # fmt: skip
        self.server, self.pid, self.uid, self.pidfd = server, pid, uid, pidfd
        self.reader, self.writer = reader, writer
        self.max_frame_bytes = server.max_frame_bytes
        self.returning = False
        """Lent to a pure-parsing call: the pool expects it back (``pool.py``)."""
        self.killed = False

    async def ready(self) -> None:
        """Wait until the worker has confined itself; ``EnvFailed`` if it could not."""
        try:
            hello = await asyncio.wait_for(self.receive(), STARTUP_SECONDS)
        except (EOFError, FrameTooLarge, TimeoutError) as exc:
            self.kill()
            raise EnvFailed(f"an environment worker could not start: {exc}") from None
        except BaseException:
            self.kill()
            raise
        if "ready" not in hello:
            self.kill()
            raise EnvFailed(f"an environment worker could not start: {hello.get('fatal')}")
        log.debug("environment worker %d (uid %s) confined by %s", self.pid, self.uid,
                  hello["ready"])  # fmt: skip

    def alive(self) -> bool:
        """Whether it still runs, as far as the service can tell without waiting."""
        if self.killed or self.reader.at_eof():
            return False
        return not select.select([self.pidfd], [], [], 0)[0]  # a pidfd reads once it ended

    async def call(self, request: bytes) -> dict[str, Any]:
        """The reply to ``request``; EOFError when the channel breaks either way."""
        try:
            self.writer.write(frame(request))
            await self.writer.drain()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a transport already closed
            raise EOFError(f"the worker's channel: {exc}") from None
        return await self.receive()

    async def receive(self) -> dict[str, Any]:
        """The next frame; EOFError when the worker is gone or speaks out of turn,
        ``FrameTooLarge`` when its frame is longer than ``max_frame_bytes``."""
        try:
            header = await self.reader.readexactly(HEADER)
            size = int.from_bytes(header, "big")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(size)
            reply = orjson.loads(await self.reader.readexactly(size))
        except (asyncio.IncompleteReadError, orjson.JSONDecodeError, OSError, RuntimeError) as exc:
            raise EOFError(f"{type(exc).__name__} reading the worker's reply") from None
        if not isinstance(reply, dict):
            raise EOFError("the worker sent something other than an object")
        return reply

    def close(self) -> None:
        """Close the channel: no request can reach the worker any more."""
        self.writer.close()

    def kill(self) -> None:
        """SIGKILL through its pidfd (the fork server reaps it), and close the channel."""
        if self.killed:
            return
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        os.close(self.pidfd)
        self.writer.close()


class ForkServer:
    """The fork server process, and its control socket."""

    def __init__(self, process: asyncio.subprocess.Process, control: socket.socket,
                 directory: Path, max_frame_bytes: int) -> None:  # fmt: skip
        self.process, self.control, self.directory = process, control, directory
        self.max_frame_bytes = max_frame_bytes
        self.layers: list[str] = []
        self.broken = False
        self._asking = asyncio.Lock()
        self._answer: asyncio.Future[None] | None = None
        """Set while an answer is awaited: ``aclose`` ends the wait."""

    @classmethod
    async def start(cls, limits: Limits, max_frame_bytes: int) -> ForkServer:
        """A fork server that has imported the environments and confined itself;
        ``EnvFailed`` if it could not."""
        remove_orphaned_folders()
        directory = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "wander.service.sandbox.forkserver",
                orjson.dumps(limits.to_dict()).decode(), str(theirs.fileno()),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, cwd=directory,
                env=worker_environment(directory), pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        except BaseException:
            control.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            theirs.close()
        control.setblocking(False)
        server = cls(process, control, directory, max_frame_bytes)
        try:
            hello, _ = await asyncio.wait_for(server._receive(), STARTUP_SECONDS)
        except (EOFError, TimeoutError) as exc:
            await server.aclose()
            raise EnvFailed(f"the environments' fork server could not start: {exc}") from None
        except BaseException:
            await server.aclose()
            raise
        if "ready" not in hello:
            await server.aclose()
            raise EnvFailed(f"the environments' fork server could not start: {hello.get('fatal')}")
        server.layers = hello["ready"]
        log.info("environment fork server %d started, confined by %s", process.pid, server.layers)
        return server

    async def fork(
        self, env: str | None = None, op: str | None = None, grants: Grants = NO_GRANTS
    ) -> WorkerProcess:
        """A new worker, forked and not yet ready (``WorkerProcess.ready``), warmed up for
        ``op`` calls of ``env``, with what ``grants`` allows beyond the confinement;
        ``EnvFailed`` if the server could not fork one, or is gone (it is then ``broken``)."""
        loop = asyncio.get_running_loop()
        request = orjson.dumps({"env": env, "op": op, **asdict(grants)})
        async with self._asking:
            try:
                await loop.sock_sendall(self.control, request)
                answer, descriptors = await self._receive()
            except (EOFError, OSError) as exc:
                self.broken = True
                raise EnvFailed(f"the environments' fork server stopped: {exc}") from None
        if "error" in answer or len(descriptors) != 2:
            for descriptor in descriptors:
                os.close(descriptor)
            raise EnvFailed(f"the environments' fork server could not fork: {answer.get('error')}")
        channel, pidfd = descriptors
        try:
            reader, writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=channel))
        except BaseException:
            os.close(pidfd)
            raise
        return WorkerProcess(self, answer["pid"], answer["uid"], pidfd, reader, writer)

    async def _receive(self) -> tuple[dict[str, Any], list[int]]:
        """The next message and its descriptors; EOFError when the server is gone."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, descriptors, flags, _ = socket.recv_fds(self.control, MESSAGE_BYTES, 2)
                break
            except BlockingIOError:
                if self.control.fileno() < 0:
                    raise EOFError("the fork server was stopped") from None
                fd = self.control.fileno()
                self._answer = loop.create_future()
                loop.add_reader(fd, _resolve, self._answer)
                try:
                    await self._answer
                finally:
                    if self._answer is not None:  # aclose did not take it away already
                        self._answer = None
                        loop.remove_reader(fd)
        if not data or flags & socket.MSG_CTRUNC:
            for descriptor in descriptors:
                os.close(descriptor)
            raise EOFError("the fork server is gone")
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            for descriptor in descriptors:
                os.close(descriptor)
            raise EOFError("the fork server sent something other than an object")
        return answer, descriptors

    async def aclose(self) -> None:
        """Stop the server: closing its socket tells it to kill and reap its workers and
        end; it is killed if it has not within a few seconds (its workers then die with
        it: ``PR_SET_PDEATHSIG``)."""
        self.broken = True
        answer, self._answer = self._answer, None
        if answer is not None:
            asyncio.get_running_loop().remove_reader(self.control.fileno())
            if not answer.done():
                answer.set_exception(EOFError("the fork server was stopped"))
        self.control.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
