"""The documents the engine keeps in the store and sends on the hot path.

They are plain dicts encoded with orjson, not pydantic models. The engine wrote
every stored document itself, so validating it again at every step, and
building response models only to dump them, was most of a step's cost. The
shapes are the wire models' (``client.models``): a ``StepResult`` dict dumps to
exactly the JSON a ``StepResult`` would, and the tests parse it back with the
model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

import orjson

from service.envs.sdk import Message


class Episode(TypedDict):
    """``client.models.Episode``: a new episode, as created."""

    id: str
    env: str
    split: str
    example: int
    seed: int
    group: str
    run: str | None
    turn: int
    done: bool
    observation: list[Message]
    info: dict[str, Any]


class StepResult(TypedDict):
    """``client.models.StepResult``."""

    episode_id: str
    turn: int
    observation: list[Message]
    reward: float
    done: bool
    info: dict[str, Any]


class ErrorInfo(TypedDict):
    code: str
    message: str
    details: Any


class StepError(TypedDict):
    """``client.models.StepError``: the result of one failed step of a batch."""

    episode_id: str
    error: ErrorInfo


class LastStep(TypedDict):
    """The last applied step, kept so that a retry of it returns the same result."""

    action: Message
    result: StepResult


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
    status: Literal["active", "done", "aborted"]
    turn: int
    messages: list[Message]
    state: dict[str, Any]
    step_rewards: list[float]
    total: float
    """The running total after the last step (the base of the next step's reward)."""
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
