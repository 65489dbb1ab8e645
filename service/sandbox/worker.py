"""An environment worker: what a process forked by the fork server runs.

The fork server (``forkserver.py``) imported every environment; the worker it forks
confines itself (``confine.py``), says it is ready on its channel to the service (a unix
socket), then answers requests in frames (8 bytes of length, then JSON), with the guard
that refuses to run model text as code armed (``envs.guard``, installed by the fork
server). JSON both ways, never pickle: the service must be able to read what a worker
says without trusting it. The environments' own ``print`` goes to /dev/null (the fork
server's descriptors 0 and 1).

It answers one call, and another only while every call it answered was of an
environment that declared itself pure parsing (``Environment.pure_parsing``) or is
hosted (``envs.hosted``: the service keeps its worker for one episode's next step, and
lends it to no other): after any other call it says it retires and ends. The service
does not rely on that (a worker that runs an attacker's code says what the attacker
wants): it kills the worker after such a call whatever it says (``pool.py``).
"""

from __future__ import annotations

import encodings
import gc
import importlib
import pkgutil
import resource
from typing import Any

import orjson

from wander.service.envs import Registry, guard
from wander.service.envs.hosted import Hosted
from wander.service.envs.hosted.replay import Nondeterministic
from wander.service.envs.sdk import EnvConfig, Environment
from wander.service.frames import read_frame, write_frame
from wander.service.sandbox import calls

ERROR_CHARS = 2000
"""The most of an exception's text a reply carries (the service logs it)."""


class Worker:
    """The environments, and their configs parsed once."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.configs: dict[tuple[str, bytes], EnvConfig] = {}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One call; a step or a score (the calls that see an action) under the guard
        that refuses to run any text as code (``envs.guard``)."""
        op, name, config, arguments = _unpack(request)
        env = self.registry[name]
        parsed = self.config(env, config)
        if op == "start":
            return dict(calls.start(env, parsed, **arguments))
        with guard.untrusted():
            return dict(calls.CALLS[op](env, parsed, **arguments))

    def config(self, env: Environment[Any], config: dict[str, Any]) -> EnvConfig:
        key = (env.name, orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        parsed = self.configs.get(key)
        if parsed is None:
            parsed = self.configs[key] = env.Config.model_validate(config)
        return parsed

    def serves_again(self, request: Any) -> bool:
        """Whether ``request`` was a call of an environment that is pure parsing, or of a
        hosted one (whose worker the service may keep for the episode's next step)."""
        name = request.get("env") if isinstance(request, dict) else None
        env = self.registry.get(name) if isinstance(name, str) else None
        return env is not None and (env.pure_parsing is True or isinstance(env, Hosted))


def _unpack(request: dict[str, Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """A request's call, environment, config, and the call's other arguments."""
    arguments = dict(request)
    return arguments.pop("op"), arguments.pop("env"), arguments.pop("config"), arguments


def serve(worker: Worker, source: int, sink: int, retire_after: float) -> None:
    """Answer requests until the service closes the channel or the worker must retire:
    after a call of an environment that is not pure parsing, after a MemoryError, or
    past half its CPU budget."""
    while (request := read_frame(source)) is not None:
        reply = answer(worker, request)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if usage.ru_utime + usage.ru_stime > retire_after:
            reply["retire"] = True
        try:
            body = orjson.dumps(reply)
        except TypeError as exc:  # a state that is not JSON (a set, an integer past 64 bits)
            error = {"error": f"the environment returned {exc}", "raised": "TypeError"}
            body = orjson.dumps({**error, **_retire(reply)})
        write_frame(sink, body)
        if reply.get("retire"):
            return


def answer(worker: Worker, request: bytes) -> dict[str, Any]:
    """``{"ok": result}``, or ``{"error": text, "raised": class name}`` (and the ``turn``
    where a replay diverged: ``Nondeterministic``); with ``retire``
    unless the call was of a pure-parsing environment and ended without a MemoryError
    (the worker's heap may be in any state after one)."""
    message = None
    try:
        message = orjson.loads(request)
        reply: dict[str, Any] = {"ok": worker.handle(message)}
    # Environment code may raise anything, SystemExit and RecursionError included.
    except BaseException as exc:
        raised = type(exc).__name__
        text = f"{raised}: {exc}"[:ERROR_CHARS]
        if isinstance(exc, MemoryError):
            return {"error": text, "raised": raised, "retire": True}
        reply = {"error": text, "raised": raised}
        if isinstance(exc, Nondeterministic):
            reply["turn"] = exc.turn
    if not worker.serves_again(message):
        reply["retire"] = True
    return reply


class WarmUp:
    """What a fresh worker runs before it says it is ready, so that a tenant's call does
    not pay for it.

    A fresh worker's first call copies every page of the fork server's memory it writes
    to (the reference counts of the objects it touches), and an environment's first
    ``start`` fills its lazy caches (``rg/countdown``'s take tens of milliseconds). So,
    for the environment and the call the pool expects next (those of its latest call):

    - the fork server runs that environment's ``start`` once (its first example, the
      default config, seed 0), in its own memory, which every later worker shares: only
      for environments Wander ships, whose cost is known (a plugin's code could hang the
      server, which every worker waits on);
    - each worker then runs that call on that episode (a ``step`` answers the empty
      message), copying the pages the tenant's call will write: a handful of page faults
      are left (bench/README.md, "Worker isolation").

    Otherwise (nothing called yet, a plugin's environment), the worker runs a ``start``
    and a ``step`` of ``double_check``, which copies most of those pages. Every input is
    Wander's own, none is anyone's text.
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.episodes: dict[str, dict[str, Any] | None] = {}
        """Environment -> the request of its warm-up episode (``None``: none can be)."""

    def prepare(self, name: str) -> dict[str, Any] | None:
        """In the fork server: the warm-up episode of ``name``, started once."""
        if name not in self.episodes and name in self.worker.registry:
            self.episodes[name] = self._start(name)
            gc.freeze()  # what it built is the server's: a worker's collections skip it
        return self.episodes.get(name)

    def _start(self, name: str) -> dict[str, Any] | None:
        env = self.worker.registry[name]
        if not type(env).__module__.startswith("wander.") or isinstance(env, Hosted):
            return None
        config = env.Config().model_dump(mode="json")
        request = {"env": name, "config": config}
        started = answer(self.worker, orjson.dumps({**request, **FIRST_EXAMPLE}))
        if not isinstance(started.get("ok"), dict):
            return None
        return {**request, "state": started["ok"].get("state")}

    def run(self, op: str | None, episode: dict[str, Any] | None) -> None:
        """In a fresh worker, before it says it is ready: ``op`` on ``episode`` (as
        ``prepare`` made it), or ``double_check``'s start and step."""
        if episode is None or op not in calls.CALLS:
            episode, op = self.prepare(FALLBACK), "advance"
            if episode is None:
                return
        if op == "start":
            request = {**episode, **FIRST_EXAMPLE}
            del request["state"]
        elif op == "advance":
            request = {**episode, "op": op, "action": EMPTY_ANSWER, "seed": 0}
        else:
            request = {**episode, "op": op}
        orjson.dumps(answer(self.worker, orjson.dumps(request)))


FALLBACK = "double_check"
FIRST_EXAMPLE = {"op": "start", "split": "train", "index": 0, "seed": 0}
EMPTY_ANSWER = {"role": "assistant", "content": ""}


def _retire(reply: dict[str, Any]) -> dict[str, Any]:
    return {"retire": True} if reply.get("retire") else {}


def preload() -> None:
    """Import what environments import lazily, while the fork server can still read it:
    once in its jail, an interpreter installed under a private home (``/root/.pyenv``)
    cannot be read any more. The codecs are the one case found (``rg/bf`` decodes with
    ``unicode_escape``: a sweep of every rg dataset through a confined worker)."""
    for module in pkgutil.iter_modules(encodings.__path__):
        try:
            importlib.import_module(f"encodings.{module.name}")
        except ImportError:  # a codec for another platform (mbcs...)
            continue
