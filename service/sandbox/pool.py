"""The pool of environment workers, driven from the event loop.

A worker never serves anyone after it ran untrusted text: each call of an environment
that is not pure parsing (``Environment.pure_parsing``) is answered by a worker of its
own, killed right after, whatever it answered and whatever it says. A worker that ran
an attacker's code (a plugin's hole) can therefore not answer a later call, of this
tenant or another, nor read one; the start of an episode counts (its config comes from
the client). Only a worker whose every call was of a pure-parsing environment goes back
to serve the next.

The workers of an environment the operator grants more (``confine.Grants``: the
network, ``WANDER_ENV_NETWORK``, for a hosted taskset that talks to a server of its own;
processes, ``WANDER_ENV_PROCESSES``, for one whose tools are servers it starts) are
forked for their call, with what it grants, and never join the ready workers.

Hosted environments (another framework's, ``envs.hosted``) are the one exception, for
one episode at a time: they keep an episode live in their worker's memory, and a step
that lands elsewhere must replay the whole episode. So the worker of a hosted
environment's step, or of the create of an episode created alone (not a group's), is
kept, idle, for that episode's next step only (``keep``: the episode id), never lent to
another episode or tenant: a hole in the environment reaches
nothing it could not already reach in that episode's own calls. At most ``kept`` are
kept; the least recently stepped is stopped first (its episode replays when it comes
back).

Workers are forked by the fork server (``launcher.py``, ``forkserver.py``) ahead of need,
so that a call costs a round trip on a worker that is already there, not a fork
(``bench/README.md``, "Worker isolation"): the pool keeps twice ``env_workers`` ready
(forked and confined; at most 16 beyond ``env_workers``) when idle, so that some still
are when every slot is busy, and forks each worker's replacement in the background once
its call is over, not while it runs (a fork during a short call takes a core from it on
a small machine). Nothing is started before the first isolated
call: a service that only plays inline environments never pays for it.

At most ``env_workers`` calls run at once; the slots are shared fairly by tenants
(``fairness.py``), and a call that gets none within ``WANDER_ENV_WAIT_SECONDS`` fails
with ``env_busy``. Each call is a frame written to its worker's channel and a frame read
back, awaited on the event loop: the loop is never blocked, however long the
environment takes. Past the deadline the worker is killed (SIGKILL: nothing inside can
refuse it) and the call fails with ``env_timeout``; a worker that dies, breaks its
channel or sends a reply that is not what its call returns (``replies.py``: a worker's
reply is not trusted) fails its call with ``env_failed``. An environment that raises
fails its call with ``env_error``.

A reply's frame may be no larger than the largest stored episode
(``WANDER_MAX_EPISODE_BYTES``): the length it declares is checked before a byte of it is
read, and it is read as it arrives, so a worker cannot make the service allocate more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine, Hashable, Mapping
from typing import Any, TypeVar

import orjson

from wander.service.envs.guard import reportable
from wander.service.errors import (
    EnvBusy,
    EnvError,
    EnvFailed,
    EnvNondeterministic,
    EnvTimeout,
    PayloadTooLarge,
)
from wander.service.metrics import HOSTED_STEPS
from wander.service.sandbox.confine import Grants, Limits
from wander.service.sandbox.fairness import FairSlots
from wander.service.sandbox.launcher import (
    STARTUP_SECONDS,
    ForkServer,
    FrameTooLarge,
    WorkerProcess,
)
from wander.service.sandbox.replies import BadReply

log = logging.getLogger(__name__)
T = TypeVar("T")
READY_BEYOND_SLOTS = 16
"""At most this many workers are kept ready beyond ``env_workers``."""


class WorkerPool:
    """Runs at most ``size`` calls at once, each in a worker of its own (unless
    ``reuse``), under ``deadline`` seconds, after waiting at most ``wait`` seconds for a
    slot."""

    def __init__(
        self, size: int, deadline: float, memory_bytes: int, wait: float, max_frame_bytes: int,
        uids: str = "100000-165535", kept: int = 0, grants: Mapping[str, Grants] | None = None,
    ) -> None:  # fmt: skip
        self.size, self.deadline, self.wait = size, deadline, wait
        self.max_frame_bytes = max_frame_bytes
        self.limits = Limits(
            memory_bytes=memory_bytes, cpu_seconds=int(600 + 2 * deadline), parent=os.getpid(),
            uids=uids,
        )  # fmt: skip
        self.slots = FairSlots(size)
        self.ready_target = size + min(size, READY_BEYOND_SLOTS)
        """Workers kept ready when the pool is idle: more than the calls that may run, so
        that some still are when every slot is busy (each holds ~4 MB of its own)."""
        self._ready: deque[WorkerProcess] = deque()
        """Workers forked, confined and waiting for a call, the newest (its memory the
        likeliest still in the caches) at the right, where calls take from."""
        self._takers: deque[asyncio.Future[WorkerProcess]] = deque()
        """Calls waiting for a worker (none was ready)."""
        self._forking = 0
        """Workers asked of the fork server and not ready yet."""
        self._returning = 0
        """Workers lent to calls of pure-parsing environments: expected back."""
        self._workers: set[WorkerProcess] = set()
        self.grants = dict(grants or {})
        """Environments whose calls run in a worker forked for the call, granted more than
        the others (``WANDER_ENV_NETWORK``, ``WANDER_ENV_PROCESSES``)."""
        self.kept = kept
        self._kept: OrderedDict[str, WorkerProcess] = OrderedDict()
        """Idle workers kept for the next step of their episode (by its id), the least
        recently stepped first."""
        self._server: ForkServer | None = None
        self._starting = asyncio.Lock()
        self._refilling: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._expected: tuple[str | None, str | None] = (None, None)
        """The environment and the call of the latest call: the next workers are warmed
        up for them (``worker.WarmUp``)."""

    @property
    def ready_workers(self) -> int:
        """Workers forked, confined and waiting for a call (for benchmarks and tests)."""
        return len(self._ready)

    async def call(
        self, request: dict[str, Any], check: Callable[[Any], T], tenant: Hashable = None,
        reuse: bool = False, keep: str | None = None,
    ) -> T:  # fmt: skip
        """The worker's result for ``request`` (a call of ``tenant``), as ``check`` returns
        it (``BadReply``: the reply is not what the call returns); its worker serves
        another call only if ``reuse`` (its environment is pure parsing), or the next call
        of the episode ``keep`` (a hosted environment's step), in the worker kept for it
        if there is one. Raises
        ``env_busy`` (no slot came free in time), ``env_timeout``, ``env_failed``,
        ``payload_too_large`` (a reply larger than the largest episode), or
        ``env_error`` (the environment raised: its text is logged, not answered)."""
        body = orjson.dumps(request)
        if not await self.slots.acquire(tenant, self.wait):
            raise EnvBusy(f"every environment worker stayed busy for {self.wait:g} s; try again")
        self._expected = (request["env"], request["op"])
        try:
            return await self._run(body, request["env"], check, reuse, keep, request["op"])
        finally:
            self.slots.release(tenant)

    async def _run(
        self, body: bytes, env: str, check: Callable[[Any], T], reuse: bool, keep: str | None,
        op: str,
    ) -> T:  # fmt: skip
        """One call in a worker of its own (or ``keep``'s): its checked result, or the
        sandbox's error."""
        worker = self._kept_for(keep)
        if keep is not None and op == "advance":
            HOSTED_STEPS.labels(env, "replayed" if worker is None else "live").inc()
        if worker is None:
            granted = self.grants.get(env)
            worker = await (self._granted(env, granted) if granted else self._take(reuse))
        try:
            reply = await asyncio.wait_for(worker.call(body), self.deadline)
            result = _result(reply, env, check)
        except TimeoutError:
            self._discard(worker)
            raise EnvTimeout(
                f"the environment {env!r} took longer than {self.deadline:g} s; "
                "its worker was stopped"
            ) from None
        except EOFError as exc:
            self._discard(worker)
            raise EnvFailed(
                f"the environment {env!r} stopped during the call: past its memory budget, "
                "or killed"
            ) from exc
        except FrameTooLarge as exc:
            self._discard(worker)
            raise PayloadTooLarge(
                f"the environment {env!r} answered with {exc.size} bytes, over the limit of "
                f"{self.max_frame_bytes} (WANDER_MAX_EPISODE_BYTES); nothing was applied",
                {"episode_bytes": exc.size, "max_episode_bytes": self.max_frame_bytes},
            ) from None
        except BadReply as exc:
            self._discard(worker)
            log.warning("the worker of %r sent %s; it was retired", env, exc)
            raise EnvFailed(
                f"the environment {env!r} answered with a reply that is not a result; "
                "nothing was applied and its worker was replaced"
            ) from None
        except EnvError:  # the environment's own exception
            self._release(worker, reply)
            raise
        except BaseException:  # cancelled mid-call: the worker's next frame is stale
            self._discard(worker)
            raise
        self._release(worker, reply, keep)
        return result

    def _kept_for(self, episode: str | None) -> WorkerProcess | None:
        """The worker kept for ``episode``'s next call, if it still runs."""
        worker = self._kept.pop(episode, None) if episode is not None else None
        if worker is not None and (not worker.alive() or worker.server.broken):
            self._discard(worker)
            return None
        return worker

    async def _take(self, reuse: bool) -> WorkerProcess:
        """A ready worker, waiting for one to be forked if none is."""
        if self._closed:
            raise EnvFailed("the service is stopping")
        while self._ready and not self._ready[-1].alive():
            self._discard(self._ready.pop())  # killed while it waited, or its server
        if self._ready:
            worker = self._ready.pop()
        else:
            worker = await self._wait_for_worker()
        worker.returning = reuse
        self._returning += reuse
        return worker  # its replacement is forked once the call is over (``_discard``)

    async def _granted(self, env: str, grants: Grants) -> WorkerProcess:
        """A worker granted ``grants``, forked for this call: never one of the ready
        workers, and never given back to them (``_release`` stops it, or keeps it for the
        call's episode alone)."""
        if self._closed:
            raise EnvFailed("the service is stopping")
        worker = await (await self._fork_server()).fork(env, self._expected[1], grants)
        self._workers.add(worker)
        try:
            await asyncio.wait_for(worker.ready(), STARTUP_SECONDS)
        except TimeoutError:
            self._discard(worker)
            raise EnvFailed("no environment worker could be started in time") from None
        except BaseException as exc:
            self._discard(worker)
            if isinstance(exc, Exception) and not isinstance(exc, EnvFailed):
                raise EnvFailed(f"an environment worker could not be started: {exc}") from exc
            raise
        return worker

    async def _wait_for_worker(self) -> WorkerProcess:
        wanted: asyncio.Future[WorkerProcess] = asyncio.get_running_loop().create_future()
        self._takers.append(wanted)
        self._refill()
        try:
            return await asyncio.wait_for(wanted, STARTUP_SECONDS)
        except TimeoutError:
            raise EnvFailed("no environment worker could be started in time") from None
        except BaseException:  # cancelled: a worker handed over meanwhile is not lost
            if wanted.done() and not wanted.cancelled() and wanted.exception() is None:
                self._ready.append(wanted.result())
                self._give_out()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._takers.remove(wanted)

    def _release(
        self, worker: WorkerProcess, reply: dict[str, Any], keep: str | None = None
    ) -> None:
        """After a call: kept for the episode ``keep`` (a hosted environment's step), or
        back to the ready workers if lent to a pure-parsing call (and it did not ask to
        retire), else killed."""
        keeps = keep is not None and self.kept and reply.get("retire") is not True
        if keeps and not self._closed and not worker.server.broken:
            self._kept[keep] = worker
            while len(self._kept) > self.kept:
                self._discard(self._kept.popitem(last=False)[1])
            return
        if worker.returning and reply.get("retire") is not True and not self._closed:
            self._returning -= 1
            worker.returning = False
            if not worker.server.broken:
                self._ready.append(worker)
                self._give_out()
                return
        self._discard(worker)

    def _discard(self, worker: WorkerProcess) -> None:
        """Never use ``worker`` again: its channel is closed now, and it is killed (and
        replaced) as soon as the call's caller yields, so that the call's caller never
        waits for the kill and the exit it sets off."""
        if worker.returning:
            self._returning -= 1
            worker.returning = False
        self._workers.discard(worker)
        worker.close()
        asyncio.get_running_loop().call_soon(self._kill, worker)

    def _kill(self, worker: WorkerProcess) -> None:
        worker.kill()
        self._refill()

    def _refill(self) -> None:
        """Fork, in the background, what the waiting calls and the ready set lack."""
        if self._needed() > 0 and not self._closed and self._refilling is None:
            self._refilling = self._spawn(self._refill_loop())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A background task, kept until it ends (``aclose`` cancels those left)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _needed(self) -> int:
        """Workers to fork: for the calls waiting for one, and up to ``ready_target``."""
        coming = len(self._ready) + self._returning + self._forking
        return len(self._takers) + self.ready_target - coming

    async def _refill_loop(self) -> None:
        try:
            while self._needed() > 0 and not self._closed:
                self._forking += 1
                try:
                    worker = await self._fork()
                except Exception as exc:
                    self._forking -= 1
                    self._fail_taker(exc)
                    if not self._takers:  # no call waits: the next one tries again
                        return
                    continue
                self._workers.add(worker)
                self._spawn(self._when_ready(worker))
        finally:
            self._refilling = None

    async def _fork(self) -> WorkerProcess:
        """A new worker, not ready yet; a fork server found gone is started again, once."""
        server = await self._fork_server()
        try:
            return await server.fork(*self._expected)
        except EnvFailed:
            if not server.broken:
                raise
        return await (await self._fork_server()).fork(*self._expected)

    async def _when_ready(self, worker: WorkerProcess) -> None:
        try:
            await worker.ready()
        except Exception as exc:
            self._forking -= 1
            self._workers.discard(worker)
            self._fail_taker(exc)
            if self._takers:  # the calls still waiting get another try
                self._refill()
            return
        self._forking -= 1
        if self._closed or worker.server.broken:
            self._discard(worker)
            return
        self._ready.append(worker)
        self._give_out()

    def _give_out(self) -> None:
        """Ready workers to the calls waiting for one; past ``ready_target`` ready, the
        oldest are stopped (a pure-parsing call gave one back)."""
        while self._takers and self._ready:
            wanted = self._takers.popleft()
            if not wanted.done():
                wanted.set_result(self._ready.pop())
        while len(self._ready) > self.ready_target:
            self._discard(self._ready.popleft())

    def _fail_taker(self, exc: Exception) -> None:
        log.warning("an environment worker could not be started: %s", exc)
        while self._takers:
            wanted = self._takers.popleft()
            if not wanted.done():
                error = exc if isinstance(exc, EnvFailed) else EnvFailed(str(exc))
                wanted.set_exception(error)
                return

    async def _fork_server(self) -> ForkServer:
        """The fork server, started (again, if it stopped) when needed."""
        async with self._starting:
            if self._closed:
                raise EnvFailed("the service is stopping")
            if self._server is not None and self._server.broken:
                old, self._server = self._server, None
                for worker in [w for w in self._ready if w.server is old]:
                    self._ready.remove(worker)
                    self._discard(worker)
                await old.aclose()
            if self._server is None:
                self._server = await ForkServer.start(self.limits, self.max_frame_bytes)
            return self._server

    async def aclose(self) -> None:
        """Stop every worker, busy or ready, and the fork server: none outlives the
        service."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for wanted in self._takers:
            if not wanted.done():
                wanted.set_exception(EnvFailed("the service is stopping"))
        workers, self._workers, self._ready = list(self._workers), set(), deque()
        self._kept.clear()
        for worker in workers:
            worker.kill()
        async with self._starting:
            if self._server is not None:
                await self._server.aclose()
                self._server = None


def _result(reply: dict[str, Any], env: str, check: Callable[[Any], T]) -> T:
    """The checked result of a reply; ``EnvError`` for the environment's own exception
    (named only if built in), ``BadReply`` for anything that is neither."""
    if "error" in reply:
        turn = reply.get("turn")
        if reply.get("raised") == "Nondeterministic" and type(turn) is int:
            log.warning("the environment %r replayed differently at turn %d", env, turn)
            raise EnvNondeterministic(
                f"replaying this episode of {env!r}, turn {turn} gave another observation "
                "than the one recorded: the environment is not deterministic under its "
                "seeds, and the episode cannot go on",
                {"turn": turn},
            )
        name = reportable(reply.get("raised"))
        log.warning("the environment %r raised %s: %.500r", env, name, reply["error"])
        raise EnvError(
            f"the environment {env!r} raised {name} during the call; nothing was applied",
            {"exception": name},
        )
    if "ok" not in reply:
        raise BadReply("a reply with neither a result nor an error")
    return check(reply["ok"])
