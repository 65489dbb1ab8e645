"""The policy protocol: messages in, one assistant message out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from wander.client.models import AssistantMessage, Message


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a conversation: a served model, a baseline, a person."""

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        """The assistant's next message after ``messages`` (``tools``: OpenAI schemas)."""
        ...
