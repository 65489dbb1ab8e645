"""An OpenAI-compatible chat endpoint that answers tic-tac-toe prompts with a baseline.

It lets any OpenAI-client pipeline (ours included) be smoke-tested with no GPU
and no API key: ``wander policy serve --policy minimax``. Needs the service
extra (FastAPI, uvicorn).

Two things make it a stand-in for a real model server beyond Wander's own client:

- ``stream: true`` is answered as server-sent events ending in ``data: [DONE]``, as
  OpenAI and vLLM do: Verifiers' harness programs only ever ask for a stream, and its
  interception server refuses a plain JSON body ("upstream stream ended before its
  terminal event").
- A user message that is an observation wrapped in JSON, as Verifiers'
  ``OpenEnvTaskset`` sends it (``{"observation": {...}, "action_schema": {...}}``),
  is read as the observation's prompt text, so that the baselines find their board.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from wander.client.models import AssistantMessage, Message
from wander.client.policies.base import Policy
from wander.client.policies.tictactoe import Baseline, NotATicTacToePrompt


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # sampling arguments are accepted and ignored

    model: str = "baseline"
    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    """OpenAI tool schemas, handed to the policy."""
    n: int = Field(1, ge=1, le=64)
    seed: int | None = None
    """OpenAI's ``seed``: the baseline's choices for this request are drawn from a
    generator seeded by it and the conversation's length, so they repeat."""
    stream: bool = False
    stream_options: StreamOptions | None = None


def prompt_text(content: str) -> str:
    """The text a baseline should read in one user message: ``content`` itself, or, when
    it is an OpenEnv observation wrapped in JSON, the observation's prompt (its ``prompt``
    field, else the last of its ``messages`` that has text)."""
    try:
        wrapped = json.loads(content)
    except ValueError:
        return content
    if not isinstance(wrapped, dict) or not {"observation", "action_schema"} <= wrapped.keys():
        return content
    observation = wrapped["observation"]
    if not isinstance(observation, dict):
        return content
    if isinstance(prompt := observation.get("prompt"), str):
        return prompt
    messages = observation.get("messages")
    texts = [m.get("content") for m in messages or [] if isinstance(m, dict)]
    return next((text for text in reversed(texts) if isinstance(text, str) and text), content)


def unwrapped(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every user message read through ``prompt_text``."""
    return [
        m.model_copy(update={"content": prompt_text(m.content)})
        if m.role == "user" and m.content
        else m
        for m in messages
    ]


def _completion_chunks(
    header: dict[str, Any], replies: Sequence[AssistantMessage], usage: bool
) -> Iterator[str]:
    """The server-sent events of a streamed completion: each choice's whole message in one
    delta, then its finish reason, then (if asked) the usage, then ``[DONE]``."""

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        chunk = {**header, "object": "chat.completion.chunk", "choices": choices, **extra}
        return f"data: {json.dumps(chunk)}\n\n"

    for index, reply in enumerate(replies):
        delta = reply.model_dump(mode="json")
        for position, call in enumerate(delta.get("tool_calls") or []):
            call["index"] = position  # streamed tool calls are numbered
        yield event([{"index": index, "delta": delta, "finish_reason": None}])
        finish = "tool_calls" if reply.tool_calls else "stop"
        yield event([{"index": index, "delta": {}, "finish_reason": finish}])
    if usage:
        yield event([], usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    yield "data: [DONE]\n\n"


def create_policy_app(policy: Policy, name: str) -> FastAPI:
    app = FastAPI(title=f"Wander baseline policy: {name}")

    @app.exception_handler(NotATicTacToePrompt)
    async def _not_a_board(request: Request, exc: Exception) -> JSONResponse:
        error = {"message": str(exc), "type": "invalid_request_error", "code": None}
        return JSONResponse({"error": error}, status_code=400)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "wander"}]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: ChatRequest) -> dict[str, Any] | StreamingResponse:
        conversation = unwrapped(body.messages)
        player = policy
        if body.seed is not None and isinstance(policy, Baseline):
            player = policy.seeded(body.seed, len(conversation))
        replies = [await player.act(conversation, body.tools) for _ in range(body.n)]
        header = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
                  "model": body.model}  # fmt: skip
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(
                _completion_chunks(header, replies, usage), media_type="text/event-stream"
            )
        choices = [
            {"index": index, "message": reply.model_dump(mode="json"), "finish_reason": "stop"}
            for index, reply in enumerate(replies)
        ]
        return {
            **header,
            "object": "chat.completion",
            "choices": choices,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app
