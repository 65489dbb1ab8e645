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


def latest_turn(messages: Sequence[Message]) -> list[Message]:
    """The system messages of ``messages``, then what came after the last assistant message."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return [m for m in messages[: last + 1] if m.role == "system"] + list(messages[last + 1 :])


class LatestTurn:
    """``policy`` shown only the system messages and the latest turn (``latest_turn``).

    For a model trained one move at a time (``tictactoe_move``) playing whole games: each
    message of the game holds the whole position, and a conversation of earlier boards is
    a context it never saw in training (and, for a tiny model, a list of cells that were
    free several messages ago to copy from)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    @property
    def plays(self) -> frozenset[str] | None:
        known = getattr(self.policy, "plays", None)
        return known if isinstance(known, frozenset) else None

    def for_episode(self, example: int, rollout: int) -> LatestTurn:
        return LatestTurn(for_episode(self.policy, example, rollout))

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        return await self.policy.act(latest_turn(messages), tools)
