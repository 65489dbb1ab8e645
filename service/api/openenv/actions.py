"""OpenEnv actions as Wander actions: what a step frame's ``data`` asks the engine to do.

OpenEnv clients send an action as a JSON object. Wander's is ``{"content": ...}`` (the
model's reply), and its text is what the environment reads. Verifiers' OpenEnvTaskset
decodes JSON-looking replies before sending them (``5``, ``1.5``, ``true``, lists,
objects), so a non-string ``content`` is taken as its JSON text, and an object reply
without ``content`` (the model answered with a JSON object) is the content as a whole:
the model's reply always reaches the environment, which judges it, rather than failing
the episode. Tool environments also take OpenEnv's ``list_tools`` (answered without a
step) and ``call_tool`` (one step with one OpenAI tool call).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from wander.client.models import AssistantMessage
from wander.service.api.openenv.wire import field_errors
from wander.service.errors import InvalidInput

CONTENT_KEYS = frozenset({"content", "tool_calls", "metadata"})
"""The keys of a Wander action; OpenEnv's Action base class adds ``metadata`` (ignored)."""
CALL_KEYS = frozenset({"type", "tool_name", "arguments", "metadata"})


@dataclass(frozen=True, slots=True)
class ListTools:
    """OpenEnv's ``{"type": "list_tools"}``: the tools, no step."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One step: the assistant message the engine applies."""

    message: AssistantMessage | str
    """The message, or (the common case) its text alone: the engine makes that the
    assistant's message without a model to validate and dump."""
    tool_name: str | None = None
    """Set for a ``call_tool`` action: its answer then names the tool and its result."""


def parse_action(data: dict[str, Any], has_tools: bool) -> ListTools | Reply:
    """The step ``data`` asks for; 422 ``validation_error`` (field errors located inside
    the action) when it cannot be one."""
    kind = data.get("type")
    if kind == "list_tools" and set(data) <= {"type", "metadata"}:
        return ListTools()
    if kind == "call_tool" and set(data) <= CALL_KEYS:
        if not has_tools:
            raise _invalid(["type"], "this environment has no tools", "value_error")
        return _tool_call(data)
    if "content" in data or "tool_calls" in data:
        allowed = CONTENT_KEYS if has_tools else CONTENT_KEYS - {"tool_calls"}
        extra = sorted(set(data) - allowed)
        if extra:
            raise InvalidInput(
                "the action has fields a WanderAction does not",
                [{"loc": [key], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
                 for key in extra],
            )  # fmt: skip
        calls = data.get("tool_calls")
        content = data.get("content")
        if calls is None and isinstance(content, str) and "\0" not in content:
            return Reply(content)  # a plain reply, every step of a game: nothing to validate
        if not (content is None and calls):
            content = as_text(content)
        return Reply(_message({"content": content, "tool_calls": calls}))
    return Reply(_message({"content": as_text(data)}))


def as_text(value: Any) -> str:
    """The text of a reply: a string as it is, anything else as its JSON text."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_call(data: dict[str, Any]) -> Reply:
    name = data.get("tool_name")
    if not isinstance(name, str) or not name:
        raise _invalid(["tool_name"], "the tool's name, a string", "string_type")
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # OpenEnv 0.10 takes them JSON-encoded too
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise _invalid(["arguments"], "the arguments, a JSON object", "dict_type")
    encoded = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    call = {"id": _call_id(name, encoded), "type": "function",
            "function": {"name": name, "arguments": encoded}}  # fmt: skip
    return Reply(_message({"content": None, "tool_calls": [call]}), tool_name=name)


def _call_id(name: str, arguments: str) -> str:
    """The call's id, from what it calls: the same call resent is the same message, so
    that the engine recognises a retry of it."""
    digest = hashlib.blake2b(f"{name}\0{arguments}".encode(), digest_size=8).hexdigest()
    return f"call_{digest}"


def _message(fields: dict[str, Any]) -> AssistantMessage:
    try:
        return AssistantMessage.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise InvalidInput("the action is invalid", field_errors(exc)) from None


def _invalid(loc: list[str], msg: str, kind: str) -> InvalidInput:
    return InvalidInput(f"invalid {loc[0]}: {msg}", [{"loc": loc, "msg": msg, "type": kind}])
