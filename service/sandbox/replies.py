"""A worker's reply, checked before the service believes a word of it.

A worker runs environment code on model text, so whatever it sends back may have been
written by an attacker inside it: the reply of each call is validated against a strict
schema (types, message roles, ``done`` a bool, JSON objects where objects belong), the
score's components must be the environment's own, finite and within its
``component_range``, and the total is computed here from them, never read. A reply that
fails any of it is ``env_failed``: nothing of it is stored, and its worker is retired.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from wander.client.models import JsonObject, Message
from wander.service.envs.sdk import Environment

Operation = Literal["start", "advance", "rescore"]
"""The calls a worker answers (``calls.CALLS``)."""
OUTCOME_CHARS = 64
"""The longest outcome (the archive's column)."""


class BadReply(ValueError):
    """A worker's reply that is not what its call returns."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Score(_Strict):
    total: float
    components: dict[str, float]
    metrics: JsonObject
    outcome: Annotated[str, Field(max_length=OUTCOME_CHARS)] | None


class _Rescored(_Strict):
    score: _Score
    info: JsonObject


class _Started(_Rescored):
    state: JsonObject
    messages: list[Message]


class _Advanced(_Started):
    done: StrictBool
    invalid: StrictBool


_MODELS: dict[str, type[_Rescored]] = {
    "start": _Started,
    "advance": _Advanced,
    "rescore": _Rescored,
}


def checked(op: Operation, env: Environment[Any], reply: Any) -> Any:
    """``reply``, the result of call ``op`` of ``env``, as the engine may store it; raises
    ``BadReply`` naming what is wrong (for the log: no text of the reply is quoted)."""
    try:
        parsed = _MODELS[op].model_validate(reply)
    except ValidationError as exc:
        fields = sorted({".".join(map(str, error["loc"][:2])) for error in exc.errors()})
        raise BadReply(f"a malformed {op} reply (at {', '.join(fields[:5])})") from None
    components = parsed.score.components
    low, high = env.component_range
    for name, value in components.items():
        if name not in env.reward_weights:
            raise BadReply(f"a score with a component {env.name} does not have")
        if not (math.isfinite(value) and low <= value <= high):
            raise BadReply(f"a score whose {name!r} is outside [{low:g}, {high:g}]")
    result: dict[str, Any] = parsed.model_dump(exclude={"score", "messages"})
    result["score"] = {
        "total": env.total(components),
        "components": components,
        "metrics": parsed.score.metrics,
        "outcome": parsed.score.outcome,
    }
    if isinstance(parsed, _Started):
        result["messages"] = [message.model_dump() for message in parsed.messages]
    return result
