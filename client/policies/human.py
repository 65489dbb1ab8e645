"""A person at the terminal."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.prompt import Prompt

from wander.client.models import AssistantMessage, Message


class HumanPolicy:
    """Shows what the environment said since the last answer and asks for the next one.

    A bare cell number is sent as ``<move>N</move>``; anything else is sent as typed.
    """

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._shown = 0

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        if len(messages) < self._shown:
            self._shown = 0  # a new game
        for message in messages[self._shown :]:
            if message.role == "user" and message.content:
                self.console.print(Panel(message.content, title="Wander", expand=False))
        self._shown = len(messages) + 1  # and our own answer
        answer = await asyncio.to_thread(Prompt.ask, "Your move", console=self.console)
        answer = answer.strip()
        return AssistantMessage(content=f"<move>{answer}</move>" if answer.isdigit() else answer)
