"""An environment worker: ``python -m wander.service.sandbox.worker LIMITS``.

It imports every environment, confines itself (``confine.py``), says it is ready,
then answers requests one at a time, in frames on its standard input and output: 8
bytes of length, then JSON. JSON both ways, never pickle: the service must be able to
read what a worker says without trusting it. The environments' own ``print`` goes to
/dev/null: descriptors 0 and 1 are moved out of their way first.
"""

from __future__ import annotations

import encodings
import importlib
import os
import pkgutil
import resource
import signal
import sys
from typing import Any

import orjson

from wander.service.envs import Registry
from wander.service.envs.sdk import EnvConfig, Environment
from wander.service.sandbox import calls
from wander.service.sandbox.confine import Limits, confine
from wander.service.sandbox.frames import read_frame, write_frame

ERROR_CHARS = 2000
"""The most of an exception's text a reply carries (the service logs it)."""


class Worker:
    """The environments, and their configs parsed once."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.configs: dict[tuple[str, bytes], EnvConfig] = {}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op, name, config, arguments = _unpack(request)
        env = self.registry[name]
        return dict(calls.CALLS[op](env, self.config(env, config), **arguments))

    def config(self, env: Environment[Any], config: dict[str, Any]) -> EnvConfig:
        key = (env.name, orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        parsed = self.configs.get(key)
        if parsed is None:
            parsed = self.configs[key] = env.Config.model_validate(config)
        return parsed


def _unpack(request: dict[str, Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """A request's call, environment, config, and the call's other arguments."""
    arguments = dict(request)
    return arguments.pop("op"), arguments.pop("env"), arguments.pop("config"), arguments


def serve(worker: Worker, source: int, sink: int, retire_after: float) -> None:
    """Answer requests until the service closes the pipe, or the worker must retire."""
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
    """``{"ok": result}``, or ``{"error": text, "raised": class name}`` with ``retire``
    after a MemoryError (the worker's heap may be in any state after one)."""
    try:
        return {"ok": worker.handle(orjson.loads(request))}
    # Environment code may raise anything, SystemExit and RecursionError included.
    except BaseException as exc:
        raised = type(exc).__name__
        text = f"{raised}: {exc}"[:ERROR_CHARS]
        return {"error": text, "raised": raised, "retire": isinstance(exc, MemoryError)}


def _retire(reply: dict[str, Any]) -> dict[str, Any]:
    return {"retire": True} if reply.get("retire") else {}


def preload() -> None:
    """Import what environments import lazily, while the worker can still read it: once
    it is ``nobody``, an interpreter installed under a private home (``/root/.pyenv``)
    cannot be read any more. The codecs are the one case found (``rg/bf`` decodes with
    ``unicode_escape``: a sweep of every rg dataset through a confined worker)."""
    for module in pkgutil.iter_modules(encodings.__path__):
        try:
            importlib.import_module(f"encodings.{module.name}")
        except ImportError:  # a codec for another platform (mbcs...)
            continue


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the service: it stops us
    limits = Limits(**orjson.loads(sys.argv[1]))
    source, sink = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        worker = Worker(Registry.from_entry_points())
        preload()
        layers = confine(limits)
    except BaseException as exc:  # tell the service why, whatever it was
        write_frame(sink, orjson.dumps({"fatal": f"{type(exc).__name__}: {exc}"}))
        sys.exit(1)
    write_frame(sink, orjson.dumps({"ready": layers}))
    serve(worker, source, sink, retire_after=limits.cpu_seconds / 2)


if __name__ == "__main__":
    main()
