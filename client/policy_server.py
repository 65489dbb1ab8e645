"""An OpenAI-compatible chat endpoint that answers tic-tac-toe prompts with a baseline.

It lets any OpenAI-client pipeline (ours included) be smoke-tested with no GPU
and no API key: ``wander policy serve --policy minimax``. Needs the service
extra (FastAPI, uvicorn).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from wander.client.models import Message
from wander.client.policies.base import Policy
from wander.client.policies.tictactoe import NotATicTacToePrompt


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # sampling arguments are accepted and ignored

    model: str = "baseline"
    messages: list[Message] = Field(min_length=1)
    n: int = Field(1, ge=1, le=64)


def create_policy_app(policy: Policy, name: str) -> FastAPI:
    app = FastAPI(title=f"Wander baseline policy: {name}")

    @app.exception_handler(NotATicTacToePrompt)
    async def _not_a_board(request: Request, exc: Exception) -> JSONResponse:
        error = {"message": str(exc), "type": "invalid_request_error", "code": None}
        return JSONResponse({"error": error}, status_code=400)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "wander"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest) -> dict[str, Any]:
        choices = []
        for index in range(body.n):
            message = await policy.act(body.messages)
            choices.append(
                {
                    "index": index,
                    "message": message.model_dump(mode="json"),
                    "finish_reason": "stop",
                }
            )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.model,
            "choices": choices,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app
