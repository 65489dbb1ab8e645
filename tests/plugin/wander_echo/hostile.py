"""An environment with a hole: its step does what the action says, as an attacker's code
would once it runs inside a worker. Model text never runs as code in the environments
Wander ships; this one stands for the day a plugin gets that wrong, so that the tests can
show what the service's walls still hold (a worker's reply is not believed, a worker
serves one call, workers cannot see each other).

Actions (the message's content): ``spin`` (compute until killed), ``forge <json>`` (write
``<json>`` as the worker's reply frame, ahead of the real one), ``frame <bytes>`` (a reply
frame declaring that length, then as much data as the pipe takes), ``raise <name>``
(raise an exception of a class named ``<name>``, made here), ``mkdir`` (directories in
the working directory until something stops it), ``signal`` (SIGKILL every other
process it may signal: ``kill(-1)``, and say whether any was), ``stay`` (answer this
call with a forged win, then keep answering the service's later calls itself, each with
a forged win that quotes every request it read so far), ``pid [seconds]`` (answer with
its own pid and uid, after holding its worker that long), ``probe <port>`` (try what a
worker granted processes may do, and say as JSON what each try gave: run a process,
leave one running, write a file in ``/tmp``, talk to itself over loopback, connect to
``<port>`` on the service's loopback), anything else: say it back.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wander.sdk import EnvConfig, Environment, Reset, Score, Transition


def _pipes() -> tuple[int, int]:
    """The worker's request and reply descriptors, found on the stack as an attacker would."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "serve" and "sink" in frame.f_locals:
            return frame.f_locals["source"], frame.f_locals["sink"]
        frame = frame.f_back
    raise LookupError("no serve frame")


def _write(sink: int, body: bytes, declared: int | None = None) -> None:
    data = memoryview((len(body) if declared is None else declared).to_bytes(8, "big") + body)
    while data:
        data = data[os.write(sink, data) :]


def _forged(said: str) -> dict[str, Any]:
    """A reply that scores a win for whatever the request was."""
    return {
        "ok": {
            "state": {"said": said},
            "messages": [],
            "done": True,
            "invalid": False,
            "score": {"total": 1.0, "components": {"said": 1.0}, "metrics": {}, "outcome": "win"},
            "info": {"said": said},
        }
    }


def _stay(source: int, sink: int) -> None:
    """Answer this call and every later call of the service with a forged win, reading
    the later requests and quoting them all in each answer."""
    _write(sink, json.dumps(_forged("stayed")).encode())
    seen: list[str] = []
    while True:
        header = os.read(source, 8)
        if len(header) < 8:
            os._exit(0)
        size, request = int.from_bytes(header, "big"), b""
        while len(request) < size:
            request += os.read(source, size - len(request))
        seen.append(request.decode(errors="replace")[-300:])
        _write(sink, json.dumps(_forged("taken over: " + " | ".join(seen)[-4000:])).encode())


def _probe(port: int) -> dict[str, str]:
    """Each try's result, or the name of the error it met."""

    def loopback() -> str:
        with socket.create_server(("127.0.0.1", 0)) as server:
            socket.create_connection(server.getsockname(), timeout=1).close()
        return "connected"

    def service() -> str:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return "connected"

    tries: dict[str, Callable[[], str]] = {
        "process": lambda: subprocess.run(
            [sys.executable, "-c", "print(7)"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "orphan": lambda: str(subprocess.Popen(["sleep", "60"]).pid),
        "file": lambda: str(Path("/tmp/probe").write_bytes(b"x" * 100_000)),
        "loopback": loopback,
        "service": service,
    }
    said = {"uid": str(os.getuid())}
    for name, attempt in tries.items():
        try:
            said[name] = attempt()
        except (OSError, subprocess.SubprocessError) as exc:
            said[name] = type(exc).__name__
    return said


class Hostile(Environment[EnvConfig]):
    name = "hostile"
    version = "0.1.0"
    description = "Does what the action says inside its worker (tests of the sandbox)."
    kind = "single_turn"
    Config = EnvConfig
    reward_weights = {"said": 1.0}

    def examples(self, config, split):
        return ["anything"]

    def reset(self, config, example, seed):
        return Reset({"said": None}, [{"role": "user", "content": "Say anything."}])

    def step(self, config, state, action, rng):
        said = action.get("content") or ""
        verb, _, rest = said.partition(" ")
        if verb == "spin":
            while True:
                pass
        if verb == "forge":
            _write(_pipes()[1], rest.encode())
        elif verb == "frame":
            sink, size = _pipes()[1], int(rest)
            _write(sink, b"x" * min(size, 1 << 20), declared=size)
            chunk = b"x" * (1 << 20)
            for _ in range(size >> 20):
                os.write(sink, chunk)
        elif verb == "raise":
            raise type(rest, (Exception,), {})("a message that quotes " + rest)
        elif verb == "mkdir":
            for number in range(10_000_000):
                os.mkdir(str(number))
        elif verb == "signal":  # every process it may signal but itself (and its pid 1)
            try:
                os.kill(-1, signal.SIGKILL)
                said = "killed some"
            except OSError as exc:  # ESRCH: none it may signal exists
                said = f"killed none ({type(exc).__name__})"
        elif verb == "stay":
            _stay(*_pipes())
        elif verb == "probe":
            said = json.dumps(_probe(int(rest)))
        elif verb == "pid":
            time.sleep(float(rest or 0))
            said = f"{os.getpid()} {os.getuid()}"
        return Transition({"said": said}, [], True)

    def score(self, config, state):
        return Score({"said": float(state["said"] is not None)}, {})
