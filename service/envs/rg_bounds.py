"""Bounds on the options of reasoning-gym datasets: what a client may ask a generator for.

The options of ``rg/<dataset>`` pass through to the dataset's generator, whose cost
grows with them: ``max_n=10**6`` or ``max_value=10**9`` kept a generator busy for
minutes, and the generator runs when an episode is created. Each option is bounded by
what reasoning-gym itself uses for it, and checked in the service before anything is
generated (422, naming the option and its bound):

- a number by the smallest and largest values that the dataset's curriculum gives it
  (its default included): the curriculum's hardest level is as hard as the dataset's
  authors generate;
- a number that no curriculum covers by ``HEADROOM`` times its default (at least
  ``NUMBER_FLOOR``), and below zero only if its default is;
- a string by its length, a list by its number of items and each item by these rules,
  from the longest and largest values known;
- anything else (a date, a nested config) by the size of its JSON.

reasoning-gym's own checks (the config's ``validate``) still run after these.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import typing
from collections import defaultdict
from typing import Any, Protocol

from wander.service.envs.seeding import canonical_json

HEADROOM = 4
"""How far past the known values an option without a curriculum range may go."""
NUMBER_FLOOR = {True: 10, False: 1.0}
"""The least upper bound of a number without a curriculum range (integer: True)."""
LENGTH_FLOOR = 16
"""The least bound on the number of items of a list."""
TEXT_FLOOR = 64
"""The least bound on the length of a string."""
JSON_FLOOR = 256
"""The least bound on the JSON of an option of any other kind."""
FIXED = frozenset({"seed", "size"})
"""Fields of every dataset's config that the environment sets, never the client."""


class Bound(Protocol):
    """What values an option admits."""

    def admits(self, value: Any) -> bool: ...

    def describe(self) -> str:
        """The admitted values, in words: the end of "it must be ..."."""
        ...

    def schema(self) -> dict[str, Any]:
        """The admitted values, as JSON schema."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Number:
    lowest: int | float
    highest: int | float
    integer: bool
    origin: str
    """Where the range comes from, for the error message."""

    def admits(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.integer else int | float):
            return False
        return self.lowest <= value <= self.highest  # False for NaN too

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"{kind} from {self.lowest} to {self.highest} ({self.origin})"

    def schema(self) -> dict[str, Any]:
        kind = "integer" if self.integer else "number"
        return {"type": kind, "minimum": self.lowest, "maximum": self.highest}


@dataclasses.dataclass(frozen=True, slots=True)
class Flag:
    def admits(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


@dataclasses.dataclass(frozen=True, slots=True)
class Text:
    longest: int

    def admits(self, value: Any) -> bool:
        return isinstance(value, str) and len(value) <= self.longest

    def describe(self) -> str:
        return f"a string of at most {self.longest} characters"

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": self.longest}


@dataclasses.dataclass(frozen=True, slots=True)
class Items:
    most: int
    item: Bound

    def admits(self, value: Any) -> bool:
        return (
            isinstance(value, list | tuple)
            and len(value) <= self.most
            and all(self.item.admits(item) for item in value)
        )

    def describe(self) -> str:
        return f"a list of at most {self.most} items, each {self.item.describe()}"

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "maxItems": self.most, "items": self.item.schema()}


@dataclasses.dataclass(frozen=True, slots=True)
class Json:
    most_bytes: int

    def admits(self, value: Any) -> bool:
        return len(canonical_json(value)) <= self.most_bytes

    def describe(self) -> str:
        return f"a value of at most {self.most_bytes} bytes of JSON"

    def schema(self) -> dict[str, Any]:
        return {"description": self.describe()}


@dataclasses.dataclass(frozen=True, slots=True)
class Nullable:
    inner: Bound

    def admits(self, value: Any) -> bool:
        return value is None or self.inner.admits(value)

    def describe(self) -> str:
        return f"null or {self.inner.describe()}"

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [self.inner.schema(), {"type": "null"}]}


def option_bounds(config_class: type, curriculum: Any | None) -> dict[str, Bound]:
    """Option name -> its bound, for a dataset's config dataclass and its curriculum
    (an instance of reasoning-gym's ``BaseCurriculum``, or None where it has none)."""
    ranges = curriculum_values(curriculum)
    hints = _type_hints(config_class)
    bounds: dict[str, Bound] = {}
    for field in dataclasses.fields(config_class):
        if field.name in FIXED:
            continue
        known = [_default(field), *ranges.get(field.name, [])]
        bounds[field.name] = bound_of(known, hints.get(field.name), field.name in ranges)
    return bounds


def curriculum_values(curriculum: Any | None) -> dict[str, list[Any]]:
    """Config field -> every value the curriculum's levels give it.

    A range attribute sets a lower and an upper field from the same levels, each level
    one value or a ``[lowest, highest]`` pair; a scalar attribute sets one field to the
    level's whole value (which may be a list: weights, task names)."""
    values: dict[str, list[Any]] = defaultdict(list)
    if curriculum is None:
        return values
    for attribute in curriculum.attributes.values():
        if hasattr(attribute, "lower_field_name"):
            levels = [
                value
                for level in attribute.levels
                for value in (level if isinstance(level, list | tuple) else [level])
            ]
            values[attribute.lower_field_name].extend(levels)
            values[attribute.upper_field_name].extend(levels)
        else:
            values[attribute.field_name].extend(attribute.levels)
    return values


def bound_of(known: list[Any], hint: Any, ranged: bool) -> Bound:
    """The bound of an option from the values ``known`` for it, its type ``hint``, and
    whether those values are a curriculum's range (``ranged``) or only examples."""
    present = [value for value in known if value is not None]
    bound = _bound_of_present(present, hint, ranged)
    return Nullable(bound) if len(present) < len(known) else bound


def _bound_of_present(known: list[Any], hint: Any, ranged: bool) -> Bound:
    if known and all(isinstance(value, bool) for value in known):
        return Flag()
    if known and all(_is_number(value) for value in known):
        integer = all(isinstance(value, int) for value in known) and not _allows_float(hint)
        if ranged:
            return Number(min(known), max(known), integer, "the range of its curriculum")
        highest = max(HEADROOM * max(abs(value) for value in known), NUMBER_FLOOR[integer])
        lowest = -highest if min(known) < 0 else 0
        return Number(lowest, highest, integer, f"{HEADROOM} times its default at most")
    if known and all(isinstance(value, str) for value in known):
        return Text(max(HEADROOM * max(len(value) for value in known), TEXT_FLOOR))
    if known and all(isinstance(value, list | tuple) for value in known):
        items = [item for value in known for item in value]
        most = max(HEADROOM * max(len(value) for value in known), LENGTH_FLOOR)
        return Items(most, bound_of(items, _item_hint(hint), ranged=False))
    size = len(json.dumps(known, default=str)) if known else 0
    return Json(max(HEADROOM * size, JSON_FLOOR))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _allows_float(hint: Any) -> bool:
    """Whether the field's type admits floats (``float``, ``float | None``)."""
    return hint is float or float in typing.get_args(hint)


def _item_hint(hint: Any) -> Any:
    """The item type of a list type (``list[float]`` -> float; ``list[str] | None`` -> str)."""
    sequence = typing.get_origin(hint) in (list, tuple, collections.abc.Sequence)
    for arg in typing.get_args(hint):
        if arg is type(None) or arg is Ellipsis:
            continue
        return arg if sequence else _item_hint(arg)
    return None


def _type_hints(config_class: type) -> dict[str, Any]:
    """The fields' types, resolved where they can be (they are only hints here)."""
    try:
        return typing.get_type_hints(config_class)
    except Exception:  # an annotation naming what the module does not import
        return {}


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None
