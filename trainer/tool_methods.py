"""Python methods made from OpenAI tool schemas, typed and documented the way TRL reads tools.

TRL's ``environment_factory`` turns every public method of an environment class into
a tool, and the schema the model is shown comes from ``transformers``'
``get_json_schema``: the method's name, its type hints and its Google-style
docstring (a description, then ``Args:`` with one line per argument). A Wander
environment publishes its tools as JSON schemas over HTTP; ``tool_method`` turns
one into a method whose signature and docstring give that schema back (names,
types, descriptions, required arguments, enums).

The method's body forwards the arguments as the model wrote them to
``self._call_tool(name, arguments)``, without checking them against the
signature: the environment judges a tool call (a missing or unknown argument is
its error message to the model, and one of its turns), as it does when Wander's
own rollout sends the same call.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import operator
from collections.abc import Callable, Mapping
from typing import Any, Literal

JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}
"""The Python type ``get_json_schema`` maps back to each JSON-schema type."""

RESERVED = frozenset({"reset", "get_reward"})
"""Names TRL gives a meaning of its own on an environment class: not tools."""


def python_type(schema: Mapping[str, Any]) -> Any:
    """The type hint whose JSON schema (as ``get_json_schema`` writes it) is ``schema``:
    ``Literal`` for an ``enum``, a union for a list of types, ``list[...]`` for typed
    items, ``Any`` where the schema says nothing."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        return functools.reduce(operator.or_, [python_type({**schema, "type": k}) for k in kind])
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return list[python_type(schema["items"])]  # type: ignore[misc]
    return JSON_TYPES.get(str(kind), Any)


def one_line(text: str) -> str:
    """``text`` with its whitespace runs as single spaces: a docstring's ``Args:`` entry
    is one line per argument."""
    return " ".join(text.split())


def docstring(description: str, properties: Mapping[str, Mapping[str, Any]]) -> str:
    """A Google-style docstring: the tool's description, then one ``Args:`` line per
    argument (``get_json_schema`` refuses an argument it finds no line for)."""
    lines = [description.strip()]
    if properties:
        lines += ["", "Args:"]
        lines += [
            f"    {name}: {one_line(str(schema.get('description') or name))}"
            for name, schema in properties.items()
        ]
    return "\n".join(lines)


def tool_method(tool: Mapping[str, Any]) -> Callable[..., str]:
    """A method for the OpenAI tool schema ``tool`` (``{"type": "function",
    "function": {name, description, parameters}}``), named after the tool, that calls
    ``self._call_tool(name, arguments)``. Arguments are keyword-only, in the schema's
    order; those the schema does not require default to None."""
    function = tool["function"]
    name = str(function["name"])
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ValueError(f"tool {name!r} cannot be a Python method name")
    if name in RESERVED:
        raise ValueError(f"tool {name!r} has a name TRL reserves on an environment class")
    parameters = function.get("parameters") or {}
    properties: dict[str, Mapping[str, Any]] = dict(parameters.get("properties") or {})
    required = set(parameters.get("required") or [])
    hints = {argument: python_type(schema) for argument, schema in properties.items()}
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(
                argument,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=hint,
                default=inspect.Parameter.empty if argument in required else None,
            )
            for argument, hint in hints.items()
        ],
        return_annotation=str,
    )

    def method(self: Any, **arguments: Any) -> str:
        return self._call_tool(name, arguments)  # type: ignore[no-any-return]

    method.__name__ = method.__qualname__ = name
    method.__doc__ = docstring(str(function.get("description") or name), properties)
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = hints  # no "return": the model's schema would carry it as noise
    return method
