"""Scorers for datasets whose scorer evaluates its *own* text at every score.

``bitwise_arithmetic`` recomputes the expected value by ``eval`` of the question's
expression, and ``number_sorting`` reads its expected list by ``eval`` of the stored
answer. Neither is model text, but the worker's guard (``envs.guard``) cannot tell one
``eval`` from another, and must not: so these read what they need without evaluating.
The item's stored answer already holds the expected value (``hex(eval(problem))``; a
list literal), and the answer is read as the dataset reads it (``int(text, 0)``; JSON).
"""

from __future__ import annotations

import json
from typing import Any

from wander.service.envs.rg_scoring.literals import parse_literal

SORTING_TOLERANCE = 1
"""How far each sorted number may be from the expected one (number_sorting's own)."""


def score_bitwise_arithmetic(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 when the answer, read as Python's ``int(text, 0)`` reads it (hex, binary, octal
    or decimal), is the expected value; else 0.0."""
    if not isinstance(answer, str):
        return 0.0
    try:
        return 1.0 if int(answer, 0) == int(entry["answer"], 0) else 0.0
    except ValueError:
        return 0.0


def score_number_sorting(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 for the expected numbers in the asked order, each within the tolerance; the
    answer is JSON once its single quotes are double ones, as the dataset reads it."""
    if answer is None:
        return 0.0
    try:
        given = json.loads(answer.replace("'", '"'))
        if not isinstance(given, list):
            return 0.0
        expected = _expected_list(entry["answer"])
        if len(given) != len(expected):
            return 0.0
        numbers = [float(number) for number in given]
        wanted = [float(number) for number in expected]
        descending = entry["metadata"]["direction"] != "ascending"
        if numbers != sorted(numbers, reverse=descending):
            return 0.0
        close = all(abs(a - b) <= SORTING_TOLERANCE for a, b in zip(numbers, wanted, strict=True))
        return 1.0 if close else 0.0
    except Exception:  # what the dataset does: an answer it cannot read is wrong
        return 0.0


def _expected_list(stored: str) -> Any:
    """The expected list: JSON, or a Python literal (its usual ``['1.5', '-2']``)."""
    try:
        return json.loads(stored)
    except json.JSONDecodeError:
        return parse_literal(stored)


SCORERS = {
    "bitwise_arithmetic": score_bitwise_arithmetic,
    "number_sorting": score_number_sorting,
}
