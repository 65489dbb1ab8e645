"""The fork server: ``python -m wander.service.sandbox.forkserver LIMITS CONTROL``.

Every call of an environment that is not pure parsing gets a worker of its own, killed
after that one call (``pool.py``), so starting a worker must be cheap: a fresh
interpreter takes seconds to import the environments (reasoning-gym), a fork of one
that has imported them milliseconds. This process is that one: the service starts it
(``launcher.py``) with the workers' fixed environment (no secret is in its memory, so
none is in theirs), it ties itself to the service (``confine.die_with_parent``),
imports every environment once, confines itself (``confine.prepare``: as root, its
network namespace and the read-only jail), then forks workers on request, each confined
on its own (``confine.confine``: pid, IPC and mount namespaces, a uid of its own from
``WANDER_ENV_UIDS``, rlimits, Landlock's scopes) and warmed up (``worker.WarmUp``: for
the environment and the call a request names, the service's latest).

It never runs environment code on model text (only, once per environment Wander ships,
a ``start`` of its first example, to warm workers up): it reads nothing from the service
but fork requests (``{"env": name, "op": call}``, either null: what to warm up for), on a
socket (``SOCK_SEQPACKET``, descriptor CONTROL) that no worker keeps. It says
``{"ready": layers}`` (or ``{"fatal": why}``) once, then answers each
request with ``{"pid": pid, "uid": uid}`` and two descriptors: the service's end of the
worker's channel (a unix socket pair) and a pidfd of the worker, through which the
service kills it (a pid could be a later process's by then, a pidfd cannot); or with
``{"error": why}``. It reaps its workers as they end (a uid is free again only then).
When the service closes the socket, it kills its workers, reaps them and ends; when the
service dies, it is killed (``PR_SET_PDEATHSIG``), and so are its workers.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import orjson

from wander.service.envs import Registry, guard
from wander.service.frames import write_frame
from wander.service.sandbox.confine import (
    NO_GRANTS,
    Grants,
    Jail,
    Limits,
    confine,
    die_with_parent,
    fork_worker,
    prepare,
)
from wander.service.sandbox.uids import Uids, parse_range
from wander.service.sandbox.worker import FALLBACK, WarmUp, Worker, preload, serve

MESSAGE_BYTES = 4096
"""The largest message on the control socket (a request, or an answer without its
descriptors)."""
UID_WAIT_SECONDS = 1.0
"""How long a fork waits for a uid to come free when every one is held."""


@dataclass
class Child:
    """A worker the server forked and has not reaped yet."""

    uid: int | None
    directory: Path | None
    """Its working directory, when not root (as root, a ``tmpfs`` of its own namespace)."""


class ForkServer:
    """Forks confined workers of ``worker``'s environments, one per request."""

    def __init__(self, control: socket.socket, worker: Worker, jail: Jail, limits: Limits) -> None:
        self.control, self.worker, self.jail, self.limits = control, worker, jail, limits
        self.warm_up = WarmUp(worker)
        self.warm_up.prepare(FALLBACK)
        self.uids = Uids(parse_range(limits.uids))
        self.children: dict[int, Child] = {}
        self.wakeup, wakeup_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wakeup_end, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)  # wakes the select

    def serve(self) -> None:
        """Answer fork requests until the service closes the socket, reaping workers as
        they end; then stop every worker left."""
        while True:
            readable = select.select([self.control, self.wakeup], [], [])[0]
            if self.wakeup in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wakeup, MESSAGE_BYTES)
            self.reap()
            if self.control not in readable:
                continue
            request = self.control.recv(MESSAGE_BYTES)
            if not request:  # the service closed it: it is stopping
                break
            answer, descriptors = self.fork(*_asked(request))
            try:
                socket.send_fds(self.control, [orjson.dumps(answer)], descriptors)
            finally:
                for descriptor in descriptors:
                    os.close(descriptor)
        self.stop()

    def fork(
        self, env: str | None, op: str | None, grants: Grants = NO_GRANTS
    ) -> tuple[dict[str, Any], list[int]]:
        """A new worker, warmed up for ``op`` calls of ``env`` (with what ``grants`` allows
        beyond the confinement): its pid and uid, and the service's end of its channel and
        its pidfd; or why there is none."""
        episode = self.warm_up.prepare(env) if env is not None else None
        uid = self._free_uid() if self.jail.root else None
        if self.jail.root and uid is None:
            return {"error": f"every uid of {self.limits.uids} is held by a live worker"}, []
        directory = None
        if not self.jail.root:
            directory = Path(tempfile.mkdtemp(prefix="wander-env-", dir=self.jail.home))
        service_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = fork_worker(self.jail)
        except OSError as exc:
            service_end.close()
            worker_end.close()
            self._forget(Child(uid, directory))
            return {"error": f"fork: {exc}"}, []
        if pid == 0:
            self._become_worker(worker_end, uid, directory, op, episode, grants)
        worker_end.close()
        self.children[pid] = Child(uid, directory)
        return {"pid": pid, "uid": uid}, [service_end.detach(), os.pidfd_open(pid)]

    def _free_uid(self) -> int | None:
        """A uid no live worker holds; if every one is held, waiting (``UID_WAIT_SECONDS``
        at most) for workers to end: those the service just killed are not reaped yet."""
        deadline = time.monotonic() + UID_WAIT_SECONDS
        while (uid := self.uids.take()) is None and self.children:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if select.select([self.wakeup], [], [], left)[0]:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wakeup, MESSAGE_BYTES)
            self.reap()
        return uid

    def _become_worker(
        self, channel: socket.socket, uid: int | None, directory: Path | None, op: str | None,
        episode: dict[str, Any] | None, grants: Grants,
    ) -> NoReturn:  # fmt: skip
        """The forked child: confine, say ready, serve; never back into the server's loop."""
        status = 1
        fd = channel.fileno()
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            namespaces = [self.jail.host_network] if self.jail.host_network is not None else []
            _close_all_but(0, 1, 2, fd, self.jail.lifeline, *namespaces)
            layers = confine(self.jail, self.limits, uid, directory or self.jail.home, grants)
            os.close(self.jail.lifeline)
            self.warm_up.run(op, episode)
            write_frame(fd, orjson.dumps({"ready": layers}))
            serve(self.worker, fd, fd, retire_after=self.limits.cpu_seconds / 2)
            status = 0
        except BaseException as exc:  # tell the service why, whatever it was
            with contextlib.suppress(BaseException):
                write_frame(fd, orjson.dumps({"fatal": f"{type(exc).__name__}: {exc}"}))
        finally:
            os._exit(status)

    def reap(self) -> None:
        """Collect every worker that has ended, and free its uid and directory."""
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                self._forget(child)

    def _forget(self, child: Child) -> None:
        if child.uid is not None:
            self.uids.give_back(child.uid)
        if child.directory is not None:
            shutil.rmtree(child.directory, ignore_errors=True)

    def stop(self) -> None:
        """Kill every worker left and reap it: none outlives the server."""
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid, child in list(self.children.items()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self._forget(child)
        self.children.clear()


def _asked(request: bytes) -> tuple[str | None, str | None, Grants]:
    """The environment and the call a fork request names, and what its worker is granted
    (the service's own message)."""
    with contextlib.suppress(orjson.JSONDecodeError):
        named = orjson.loads(request)
        if isinstance(named, dict):
            env, op = named.get("env"), named.get("op")
            env, op = (env if isinstance(env, str) else None), (op if isinstance(op, str) else None)
            grants = Grants(named.get("network") is True, named.get("processes") is True)
            return env, op, grants
    return None, None, NO_GRANTS


def _close_all_but(*kept: int) -> None:
    """Close every descriptor but ``kept``: the control socket, the other workers'
    channels, the server's own files are not the worker's."""
    low = 0
    for fd in sorted(set(kept)):
        if low < fd:  # closerange(n, n) would close everything from n: the call is inclusive
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the service: it stops us
    limits = Limits(**orjson.loads(sys.argv[1]))
    die_with_parent(limits.parent)
    control = socket.socket(fileno=int(sys.argv[2]))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    try:
        worker = Worker(Registry.from_entry_points())
        preload()
        guard.install()  # inert until a worker arms it around a step or a score
        jail = prepare()
        server = ForkServer(control, worker, jail, limits)
    except BaseException as exc:  # tell the service why, whatever it was
        control.send(orjson.dumps({"fatal": f"{type(exc).__name__}: {exc}"[:MESSAGE_BYTES]}))
        sys.exit(1)
    gc.collect()
    gc.freeze()  # a worker's collections never touch (so never copy) the server's objects
    control.send(orjson.dumps({"ready": list(jail.layers)}))
    server.serve()


if __name__ == "__main__":
    main()
