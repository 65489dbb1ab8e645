"""The documents the engine keeps in the store and sends on the hot path.

They are plain dicts encoded with orjson, not pydantic models. The engine writes
every stored document itself, so validating it again at every step, and
building response models only to dump them, would be most of a step's cost. The
responses keep the wire models' shapes; those models (``client.models``) stay
their one definition, and the client and the tests parse every response with
them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from wander.service.envs.sdk import Message

NewEpisodeDict = dict[str, Any]
"""A new episode as a JSON-ready dict, shaped as ``client.models.NewEpisode``."""

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
    """An episode as stored: this document, the head, which every step rewrites, and its
    messages in the store's log (``store.base``), which a step only appends to, so that
    a step's cost does not grow with the episode."""

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
    messages: NotRequired[list[Message]]
    """Every message so far, here only in an episode stored before the log (an upgrade
    moves them to the log at its next step); else in the log."""
    messages_bytes: NotRequired[int]
    """The length of the messages in the log as one JSON array (``grown``): what the
    episode's size limit counts without reading the log (absent with ``messages``)."""
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


def encode_log(messages: Sequence[Message]) -> list[bytes]:
    """Messages as log entries."""
    return [orjson.dumps(message) for message in messages]


def decode_log(entries: Sequence[bytes]) -> list[Message]:
    messages: list[Message] = orjson.loads(b"[" + b",".join(entries) + b"]")
    return messages


EMPTY_LOG_BYTES = len(b"[]")


def grown(size: int, entries: Sequence[bytes]) -> int:
    """The length of a JSON array of ``size`` bytes once ``entries`` are appended to it."""
    if not entries:
        return size
    commas = len(entries) - (size == EMPTY_LOG_BYTES)
    return size + sum(map(len, entries)) + commas


def is_done(episode: StoredEpisode) -> bool:
    return episode["status"] != "active"


_second: list[Any] = [None, ""]
"""The second ``now`` last formatted, and its text."""


def now() -> str:
    """The current time as stored: ISO 8601 in UTC, as ``datetime.isoformat`` writes it
    (no fraction on a whole second).

    Every step stamps its episode, and formatting the whole time at every call is a
    visible share of the service's CPU under batch load (bench/README.md): the date and
    time of the current second are formatted once, and each call adds its
    microseconds."""
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    formatted_second, formatted = _second
    if second != formatted_second:
        formatted = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second[:] = (second, formatted)
    return f"{formatted}.{micros:06d}+00:00" if micros else f"{formatted}+00:00"
