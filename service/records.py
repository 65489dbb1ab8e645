"""The documents the engine keeps in the store and sends on the hot path.

They are plain dicts encoded with orjson, not pydantic models. The engine wrote
every stored document itself, so validating it again at every step, and
building response models only to dump them, was most of a step's cost. The
responses keep the wire models' shapes; those models (``client.models``) stay
their one definition, and the client and the tests parse every response with
them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from wander.service.envs.sdk import Message

Episode = dict[str, Any]
"""A new episode as a JSON-ready dict, shaped as ``client.models.Episode``."""

StepResult = dict[str, Any]
"""A step's result as a JSON-ready dict, shaped as ``client.models.StepResult``."""

StepError = dict[str, Any]
"""A failed step of a batch, shaped as ``client.models.StepError``."""


class LastStep(TypedDict):
    """The last applied step, kept so that a retry of it returns the same result."""

    action: Message
    result: StepResult


class StoredScore(TypedDict):
    """An episode's score after its last step, computed once when the step was applied:
    reads (``GET /score``, the episode, its archive record) never run environment code."""

    total: float
    components: dict[str, float]
    metrics: dict[str, Any]
    outcome: str | None


class StoredEpisode(TypedDict):
    id: str
    env: str
    version: str
    config: dict[str, Any]
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    metadata: dict[str, Any] | None
    tenant: NotRequired[str | None]
    """The tenant the episode belongs to (absent in episodes stored before tenants)."""
    status: Literal["active", "done", "aborted"]
    turn: int
    messages: list[Message]
    state: dict[str, Any]
    step_rewards: list[float]
    total: float
    """The running total after the last step (the base of the next step's reward)."""
    score: StoredScore
    info: dict[str, Any]
    """What clients may see of ``state`` (the environment's ``public_state``)."""
    last_step: LastStep | None
    created_at: str
    updated_at: str
    finished_at: str | None


def encode(document: Any) -> bytes:
    """JSON bytes of a document (datetimes as RFC 3339, like pydantic's)."""
    return orjson.dumps(document)


def decode(data: bytes) -> StoredEpisode:
    stored: StoredEpisode = orjson.loads(data)
    return stored


def is_done(episode: StoredEpisode) -> bool:
    return episode["status"] != "active"


def now() -> str:
    """The current time as stored: ISO 8601 in UTC."""
    return datetime.now(UTC).isoformat()
