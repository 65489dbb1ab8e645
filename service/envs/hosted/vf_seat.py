"""Wander in a Verifiers 0.4 episode's model seat: the glue that lets a taskset's
``Env.run()`` run unchanged inside a sandbox worker, one model call per Wander step.

Verifiers reaches a model through its interception server: a harness program sends each
chat completion there, the server records the turn on the trace and asks the run's
model client for the reply. Wander takes the two ends of that path:

- ``WanderSeat`` is the harness every agent seat of a hosted episode runs: Verifiers'
  harness contract allows one that runs its loop in-process ("the interception is the
  contract, not the process"). It is ``null``'s chat loop: each completion sent to the
  interception's public ``handle_request`` as a request object in memory; while the
  reply calls tools, each call goes to the task's tool servers with Verifiers' own MCP
  client (``connect_mcp``, ``call_mcp``) and the results go back in the next completion.
- ``LocalInterception`` is Verifiers' ``InterceptionServer`` whose sessions' model
  client is the episode's ``Seat`` (its private ``_client``, which would build a client
  for an endpoint): each model call waits there until Wander's next step brings the
  reply. Without tool servers it binds no socket (a worker has no network, not even
  loopback, and may start no thread or process); with them it listens on the worker's
  own loopback (``WANDER_ENV_PROCESSES`` grants one), where the servers Verifiers
  starts fetch their task and keep their state (its ``/task`` and ``/state`` routes).
- ``Run`` drives one episode on an event loop of its own, paused between steps: advanced
  to the next model call (whose request is the observation), or to the end of
  ``run()``, whose traces hold the rewards.

What a Verifiers upgrade can break (``tests/test_hosted_verifiers.py`` pins each): the
harness and interception contracts above; ``verifiers.v1.harnesses.utils.mcp``, where
the MCP client the bundled harnesses share lives; ``Env._interception``, the private attribute
through which an env's agents borrow an interception (set here before each episode, as
``Env.serving()`` does, because ``serving()`` would make one that binds a socket), and
``InterceptionServer._client``; what
``handle_request`` reads of a request (``headers``, ``path``, ``read()``,
``content_length``) and its adopting the calling task (hence a task per call); and
``Env._shared_tools``, where ``serving()`` keeps the taskset's shared tool servers, set
here as there (``Run._play`` holds for one episode what ``serving()`` holds for an
evaluation).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)
from verifiers.v1.dialects import DIALECTS  # pyright: ignore[reportMissingImports]
from verifiers.v1.dialects.chat import message_to_wire  # pyright: ignore[reportMissingImports]
from verifiers.v1.harnesses.utils.mcp import (  # pyright: ignore[reportMissingImports]
    call_mcp,
    connect_mcp,
)
from verifiers.v1.interception import InterceptionServer  # pyright: ignore[reportMissingImports]

__all__ = ["WanderSeat"]
"""What Verifiers' harness loader takes: a seat's ``harness.id`` is ``"wander"``
(``verifiers.SEAT``), and the package ``wander`` exports ``WanderSeat`` from here."""

CHAT = next(dialect for dialect in DIALECTS if "/v1/chat/completions" in dialect.routes)
MODEL = "wander"
"""The model name a hosted episode's requests carry (a seat has no model of its own)."""
_SERVERS: dict[str, LocalInterception] = {}
"""The live in-memory interceptions of this process, by the base URL they hand out."""


class NotChat(Exception):
    """A model call in another dialect than chat completions, which the seat's chat loop
    never sends."""


class Seat(vf.Client):
    """The model of one hosted episode: each call is a pause, until the reply arrives."""

    def __init__(self) -> None:
        self.asked: asyncio.Future[list[dict[str, Any]]] | None = None
        """Resolved with a call's request messages when one waits for its reply."""
        self._reply: asyncio.Future[dict[str, Any]] | None = None

    def expect(self) -> asyncio.Future[list[dict[str, Any]]]:
        self.asked = asyncio.get_running_loop().create_future()
        return self.asked

    def answer(self, reply: dict[str, Any]) -> None:
        """Give the waiting call its reply (an assistant message, as the wire has it)."""
        if self._reply is None or self._reply.done():
            raise RuntimeError("no model call is waiting for a reply")
        self._reply.set_result(reply)

    async def get_response(  # type: ignore[override]
        self,
        dialect: Any,
        body: dict[str, Any],
        sampling: Any,
        session_id: str | None = None,
        turn: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        if dialect is not CHAT:
            raise NotChat(f"hosted seats speak chat completions, not {dialect.routes}")
        self._reply = asyncio.get_running_loop().create_future()
        if self.asked is not None and not self.asked.done():
            self.asked.set_result(list(body.get("messages", [])))
        reply = await self._reply
        raw = {
            "id": f"wander-{session_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
        }
        response = dialect.parse_response(dialect.validate_response(raw))
        response.raw = raw
        return response


class LocalInterception(InterceptionServer):
    """Verifiers' interception server, reached in memory, every session it registers
    answered by ``seat``; it binds a socket on the worker's loopback only for tool
    servers (``listen``)."""

    def __init__(self, seat: Seat, listen: bool = False, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(state_service_secrets=secrets)
        self.seat = seat
        self.listen = listen

    async def start(self) -> None:
        if self.listen:
            await super().start()
        else:
            self.base_url = f"http://seat-{id(self):x}.wander.invalid"
        _SERVERS[self.base_url] = self
        self.stack.callback(_SERVERS.pop, self.base_url, None)

    def _client(self, config: Any) -> Seat:  # private in Verifiers: the session's client
        return self.seat


class _Request(dict[str, Any]):
    """What ``InterceptionServer.handle_request`` reads of an aiohttp request (which is
    also a mapping, for what a handler keeps with the request)."""

    def __init__(self, path: str, secret: str, body: bytes) -> None:
        super().__init__()
        self.path = path
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        self.content_length = len(body)
        self._body = body
        self._read_bytes: bytes | None = body

    async def read(self) -> bytes:
        return self._body


class WanderSeat(vf.Harness[vf.HarnessConfig]):
    """A seat played by Wander: a chat loop run in-process, each model call answered by
    the step Wander receives over HTTP, the tool calls it holds made by the seat."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(  # type: ignore[override]
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        **_: Any,
    ) -> Any:
        server = next((s for url, s in _SERVERS.items() if endpoint.startswith(url)), None)
        if server is None:
            raise vf.HarnessError("the wander seat runs only in Wander's hosted episodes")
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [] if system is None else [_system(system)]
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(_wire(message) for message in prompt)
        async with contextlib.AsyncExitStack() as stack:
            servers = {"mcpServers": {name: {"url": url} for name, url in mcp_urls.items()}}
            tools, dispatch, connections = await connect_mcp(servers, stack)
            while True:
                body = {"model": MODEL, "messages": messages, **({"tools": tools} if tools else {})}
                request = _Request("/v1/chat/completions", secret, json.dumps(body).encode())
                # handle_request adopts its task (cancelled when the rollout concludes).
                reply = await asyncio.create_task(server.handle_request(request, CHAT))  # type: ignore[arg-type]
                said = bytes(getattr(reply, "body", b"") or b"")
                if getattr(reply, "status", 200) != 200:
                    return vf.ProgramResult(exit_code=1, stdout="", stderr=said.decode())
                message = json.loads(said)["choices"][0]["message"]
                calls = message.get("tool_calls") or []
                if not calls:
                    return vf.ProgramResult(exit_code=0, stdout="", stderr="")
                messages.append(message)
                for call in calls:
                    content = await _tool_result(connections, dispatch, call)
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": content}
                    )


async def _tool_result(
    connections: dict[str, Any], dispatch: dict[str, tuple[str, str]], call: dict[str, Any]
) -> Any:
    """What one tool call of the model answers: the tool's result, or, for a call no tool
    can take, an error the model reads (as Verifiers' chat program words it)."""
    name = call["function"]["name"]
    if name not in dispatch:
        return f"Error: unknown tool {name!r}"
    try:
        arguments = json.loads(call["function"].get("arguments") or "{}")
    except ValueError as exc:
        return f"Error: the arguments are not JSON: {exc}"
    if not isinstance(arguments, dict):
        return "Error: the arguments must be a JSON object"
    return await call_mcp(connections, dispatch, name, arguments)


def _system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def _wire(message: Any) -> dict[str, Any]:
    return message if isinstance(message, dict) else message_to_wire(message)


class _Inline(concurrent.futures.ThreadPoolExecutor):
    """Runs what asyncio would hand a thread (``to_thread``, a loop's shutdown) in the
    caller: a worker may start no thread. (A ``ThreadPoolExecutor`` because asyncio takes
    no other kind; it starts its threads in ``submit``, which never does here.)"""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever awaits it
            future.set_exception(exc)
        return future


class Run:
    """One hosted episode of a Verifiers env, paused at its next model call (``tools``:
    its task has tool servers, started by Verifiers as processes).

    ``advance`` runs the episode until a model call waits for a reply (and returns that
    call's request messages) or until ``run()`` ends (and returns None; ``episode`` then
    holds the result). Each ``advance`` is one stretch of the episode's single thread, so
    a replay that feeds the same replies under the same seeds makes the same calls.
    """

    def __init__(self, env: Any, task: Any, tools: bool = False) -> None:
        self.loop = asyncio.new_event_loop()
        if not tools:  # a worker granted processes may start threads; others may not
            self.loop.set_default_executor(_Inline())
        self.seat = Seat()
        self.episode: Any = None
        self._env, self._task, self._tools = env, task, tools
        self._main: asyncio.Task[Any] | None = None

    async def _play(self) -> Any:
        """The episode, inside what ``Env.serving()`` holds for an evaluation: the
        taskset's shared tool servers, the interception (knowing their state secrets),
        and the env's own ``start()`` and ``stop()``; here for this one episode."""
        env = self._env
        ctx = vf.ModelContext(model=MODEL, client=vf.EvalClientConfig(base_url=_NOWHERE))
        async with env.shared_tools() as shared:
            secrets = tuple(
                server.state_secret for server in shared.values() if server.state_secret
            )
            async with LocalInterception(self.seat, self._tools, secrets) as interception:
                env._shared_tools = shared  # what Env.serving() sets (private)
                env._interception = interception
                try:
                    await env.start()
                    return await env.run_episode(self._task, ctx)
                finally:
                    await env.stop()

    def advance(self, reply: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
        return self.loop.run_until_complete(self._advance(reply))

    async def _advance(self, reply: dict[str, Any] | None) -> list[dict[str, Any]] | None:
        asked = self.seat.expect()
        if self._main is None:
            self._main = asyncio.create_task(self._play())
        else:
            self.seat.answer(reply or {"role": "assistant", "content": ""})
        await asyncio.wait({asked, self._main}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            return asked.result()
        self.episode = self._main.result()
        return None

    def close(self) -> None:
        """Cancel a paused episode and close its loop (an evicted or finished run)."""
        if self._main is not None and not self._main.done():
            self._main.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # what it caused
                self.loop.run_until_complete(self._main)
        self.loop.close()


_NOWHERE = "http://wander.invalid/v1"
"""The endpoint a seat's client config names: never reached, the seat answers."""
