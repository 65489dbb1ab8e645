"""A Wander tool environment's tools as a Verifiers 0.4 toolset: each tool call a step.

Verifiers gives a task's tools to the model's harness as MCP servers. A task-scoped
toolset is one server process per rollout, which Verifiers launches as
``python -m <this module>`` and hands the rollout's task and a channel to its state:

- ``setup_task`` takes the service's URL and the environment's tool schemas from the
  task (``WanderData``: the taskset fetched them);
- ``register`` publishes one MCP tool per Wander tool, under Wander's own name and with
  Wander's own JSON schema for its arguments (no prefix: the model sees the tools as
  Wander's own rollout shows them);
- each call is one step of the rollout's episode holding that one tool call, at the
  turn the rollout's ``WanderState`` says; the step's turn and ``done`` go back into the
  state, which Verifiers syncs with the host before and after every call. The host
  (``WanderEnv.run``) put the episode there, and steps the model's final reply at the
  turn the tools left.

The arguments reach the environment as the model wrote them: the schema is advertised,
not enforced, since the environment judges a call (a wrong argument is its error
message to the model, and one of its turns), as when Wander's own rollout sends it.
The service's API key, if it has one, comes in the state too: Verifiers keeps every
``*API_KEY*`` variable out of the processes it starts (the harness's, this server's), and
the state channel is private to the host and the rollout's tool servers (its secret is
in their environments only; the state is never written to a trace).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import keyword
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import verifiers.v1 as vf  # pyright: ignore[reportMissingImports] (the verifiers extra)
from pydantic import WithJsonSchema

from wander.client.aio import AsyncWanderClient
from wander.client.models import text_of, tool_call

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer  # pyright: ignore[reportMissingImports]

    from wander.client.verifiers import WanderData

__all__ = ["WanderState", "WanderTools", "one_at_a_time", "tool_function"]


class WanderState(vf.State):
    """A rollout's episode, shared by the host and its tool server."""

    episode_id: str | None = None
    turn: int = 0
    """The episode's next turn: where the next step goes."""
    done: bool = False
    api_key: str | None = None
    """The service's key, for the tool server's steps (None: the service has no keys)."""


class WanderTools(vf.Toolset[vf.ToolsetConfig, WanderState]):
    """The tools of the rollout's Wander environment; each call one step of its episode."""

    TOOL_PREFIX = None  # Wander's names: the model is shown what Wander's rollout shows

    _wander: AsyncWanderClient | None = None

    async def setup_task(self, task: WanderData) -> None:
        self._url, self._tools = task.url, task.tools

    def register(self, mcp: MCPServer) -> None:
        # A model may make several calls in one message, and a harness may run them at
        # once; each is a step at the state's turn, so they take turns (the state pulled
        # before and pushed after each).
        turns = asyncio.Lock()
        for tool in self._tools:
            function = tool["function"]
            mcp.add_tool(
                one_at_a_time(self._with_state(tool_function(tool, self._step)), turns),
                name=function["name"],
                description=function.get("description") or None,
            )

    async def _step(self, name: str, arguments: dict[str, Any]) -> str:
        """One step of the rollout's episode holding this one tool call; the text of what
        the environment answered. An exception is the call's error to the model."""
        state = self.state
        if state.episode_id is None:
            raise RuntimeError("this rollout has no Wander episode")
        if state.done:
            raise RuntimeError("the episode has ended; no more tool calls are run")
        if self._wander is None:  # the first call: the key comes with the state
            client = AsyncWanderClient(self._url, api_key=state.api_key or "")
            self._wander = await self._exit_stack.enter_async_context(client)
        action = tool_call(f"call_{state.turn}", name, arguments)
        result = await self._wander.step(state.episode_id, action, turn=state.turn)
        state.turn, state.done = result.turn, result.done
        return text_of(result.observation)


def one_at_a_time(
    call: Callable[..., Awaitable[str]], lock: asyncio.Lock
) -> Callable[..., Awaitable[str]]:
    """``call``, holding ``lock`` while it runs; with its signature (MCP reads it)."""

    @functools.wraps(call)
    async def held(*args: Any, **kwargs: Any) -> str:
        async with lock:
            return await call(*args, **kwargs)

    held.__signature__ = inspect.signature(call)  # type: ignore[attr-defined]
    return held


def tool_function(
    tool: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Awaitable[str]]
) -> Callable[..., Awaitable[str]]:
    """An async function for the OpenAI tool schema ``tool`` that MCP's ``add_tool``
    publishes with the schema's own argument schemas: one keyword-only parameter per
    argument, annotated ``Any`` (MCP validates nothing) with the argument's schema, and
    without a default where the schema requires it. It calls ``call(name, arguments)``
    with the arguments the model gave (an optional one it left out is not sent)."""
    function = tool["function"]
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: dict[str, Any] = dict(parameters.get("properties") or {})
    required = set(parameters.get("required") or [])
    for argument in properties:
        if not argument.isidentifier() or keyword.iskeyword(argument) or argument.startswith("_"):
            raise ValueError(f"tool {name!r}: argument {argument!r} cannot be a parameter name")
    signature = inspect.Signature(
        [
            inspect.Parameter(
                argument,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[Any, WithJsonSchema(schema)],
                default=inspect.Parameter.empty if argument in required else None,
            )
            for argument, schema in properties.items()
        ],
        return_annotation=str,
    )

    async def forward(**arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if k in required or v is not None}
        return await call(name, given)

    forward.__name__ = forward.__qualname__ = name
    forward.__signature__ = signature  # type: ignore[attr-defined]
    return forward


if __name__ == "__main__":  # how Verifiers launches a task-scoped tool server
    WanderTools.run()
