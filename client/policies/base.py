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


def for_episode(policy: Policy, example: int, rollout: int) -> Policy:
    """The player of one episode (rollout ``rollout`` of example ``example``): a policy
    with per-episode state gives one of its own (``for_episode``; the baselines' seeded
    random choices), so that a seeded evaluation repeats whatever order its concurrent
    episodes run in; any other plays every episode itself."""
    make = getattr(policy, "for_episode", None)
    player = make(example, rollout) if callable(make) else policy
    return player if isinstance(player, Policy) else policy


def plays(policy: Policy, env: str) -> bool:
    """Whether ``policy`` can play ``env``: a policy that declares ``plays`` (the
    environments it knows, as the tic-tac-toe baselines do) only those; any other, any."""
    known = getattr(policy, "plays", None)
    return not isinstance(known, frozenset) or env in known
