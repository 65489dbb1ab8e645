"""A policy served behind any OpenAI-compatible chat endpoint: vLLM, OpenAI, OpenRouter..."""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, Self

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from wander.client._api import Call
from wander.client.errors import PolicyEndpointError, WanderAPIError, WanderConnectionError
from wander.client.models import AssistantMessage, Message, ToolCall, storable
from wander.client.retry import Retry
from wander.client.transport import asend, display_url


class _Reply(BaseModel):
    """A choice's message as servers send it, with more than an action holds (OpenAI's
    ``refusal``, ``annotations`` and ``audio``, vLLM's ``reasoning_content``, an empty
    ``tool_calls``): its text and tool calls are the action, the rest is dropped."""

    content: str | None = None
    tool_calls: list[ToolCall] | None = None

    def action(self) -> AssistantMessage:
        """The action: the text as Wander takes it (``storable``), the calls if any."""
        text = None if self.content is None else storable(self.content)
        return AssistantMessage(content=text, tool_calls=self.tool_calls or None)


class _Choice(BaseModel):
    message: _Reply


class _Completion(BaseModel):
    choices: list[_Choice]


_COMPLETION = TypeAdapter(_Completion)


def stable_seed(*parts: int) -> int:
    """A 31-bit seed (what every OpenAI-compatible server takes) determined by ``parts``."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") >> 1


class OpenAIChatPolicy:
    """``POST {base_url}/chat/completions`` with the conversation, the tools and the
    sampling arguments; the first choice's message is the action.

    With a ``seed``, each episode's requests carry a seed of their own (OpenAI's and
    vLLM's ``seed``: ``for_episode``), so that a server that honours it samples the same
    replies whatever order the episodes run in.

    The key comes from ``api_key`` or the environment variable ``api_key_env``
    (none is sent if neither is set, as a local vLLM expects). Rate limits and
    server errors are retried with backoff; what still fails is a
    ``PolicyEndpointError`` naming the endpoint, never mistaken for the service's.
    """

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        sampling: Mapping[str, Any] | None = None,
        timeout: float = 300.0,
        retry: Retry | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.seed = seed
        self.sampling = dict(sampling or {})
        self.retry = retry or Retry(attempts=6, max_backoff_seconds=30.0)
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=transport,
        )
        self.url = display_url(self._http.base_url)

    def for_episode(self, example: int, rollout: int) -> Self:
        """The player of one episode: with a seed, one whose requests carry
        ``H(seed, example, rollout)`` as theirs (sharing this one's connections)."""
        if self.seed is None:
            return self
        player = copy.copy(self)
        player.sampling = {**self.sampling, "seed": stable_seed(self.seed, example, rollout)}
        return player

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        body: dict[str, Any] = {
            **self.sampling,
            "model": self.model,
            "messages": [message.model_dump(mode="json") for message in messages],
        }
        if tools:
            body["tools"] = list(tools)
        call = Call("POST", "/chat/completions", self._first_message, json=body)
        try:
            return await asend(self._http, call, self.retry)
        except WanderConnectionError as exc:
            raise PolicyEndpointError(self.url, f"cannot be reached: {exc.reason}") from exc
        except WanderAPIError as exc:
            problem = f"answered {exc.status}: {exc.message}"
            raise PolicyEndpointError(self.url, problem) from exc

    def _first_message(self, response: httpx.Response) -> AssistantMessage:
        try:
            return _COMPLETION.validate_json(response.content).choices[0].message.action()
        except (ValidationError, IndexError) as exc:
            problem = f"answered something other than a chat completion: {response.text[:200]!r}"
            raise PolicyEndpointError(self.url, problem) from exc

    async def aclose(self) -> None:
        await self._http.aclose()
