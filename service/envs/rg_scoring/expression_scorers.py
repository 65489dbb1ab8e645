"""The scorers of the reasoning-gym datasets that read the answer with sympy's ``parse_expr``.

``puzzle24``, ``countdown``, ``polynomial_multiplication``, ``simple_integration`` and
``intermediate_integration`` hand the model's answer to ``parse_expr``, which ``eval``s
it: the answer ran as code in the service. Each function here is the dataset's own
``score_answer``, step for step (its regular expression on the digits, its ``int`` or
``float`` of the value, its 0.01 and 0.05 floors, its ``simplify(derivative - integrand)
== 0``), with the text read by ``expressions`` instead, which never evaluates it; the
reference texts in the item (reasoning-gym's own) are read the same way. An answer that
``expressions`` refuses (outside its grammar or caps) gets the score reasoning-gym gives
an answer ``parse_expr`` cannot read; every other answer gets exactly reasoning-gym's
score.

Each takes ``(dataset, answer, entry)``: the dataset's generator (its ``config`` is what
``score_answer`` reads as ``self.config``), the answer (None when there is none) and the
item ``{"question", "answer", "metadata"}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy

from wander.service.envs.rg_scoring.expressions import expression, number

_INTEGERS = re.compile(r"\b\d+\b")
"""The numbers an answer uses, by puzzle24's and countdown's own pattern."""


def score_puzzle24(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 when ``int()`` of the value is 24 and the text writes the puzzle's four
    numbers; 0.01 otherwise. reasoning-gym asks only for four integers within the
    config's range, so one answer (``6*4*1*1``) solved every puzzle: a reward without
    the task, refused here deliberately."""
    if answer is None:
        return 0.01
    try:
        answer = answer.strip()
        solved = int(number(answer)) == 24
        used = [int(digits) for digits in _INTEGERS.findall(answer)]
        config = dataset.config
        within = all(config.min_value <= used_number <= config.max_value for used_number in used)
        theirs = sorted(used) == sorted(entry["metadata"]["numbers"])
        if len(used) == 4 and within and theirs and solved:
            return 1.0
    except Exception:
        pass
    return 0.01


def score_countdown(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 when the text uses exactly the item's numbers and ``float()`` of its value is
    within ``np.isclose`` of the target; 0.05 for a readable answer that is not; 0.01
    for no answer or an unreadable one."""
    if answer is None or not answer.strip():
        return 0.01
    try:
        value = float(number(answer))
        used = [int(digits) for digits in _INTEGERS.findall(answer)]
        if sorted(used) != sorted(entry["metadata"]["numbers"]):
            return 0.05
        if np.isclose(value, entry["metadata"]["target"], atol=1e-6):
            return 1.0
        return 0.05  # reasoning-gym's "0.05 if answer else 0.01": the answer is not empty
    except Exception:
        return 0.01


def score_polynomial_multiplication(
    dataset: Any, answer: str | None, entry: dict[str, Any]
) -> float:
    """1.0 when the answer is the same sympy expression as the reference answer (``==``,
    structural: the expanded product in the form sympy makes it); 0.0 otherwise."""
    if answer is None:
        return 0.0
    try:
        return 1.0 if expression(answer) == expression(entry["answer"]) else 0.0
    except Exception:
        return 0.0


def score_simple_integration(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 when the answer's derivative simplifies to the integrand; 0.0 otherwise."""
    metadata = entry["metadata"]  # read before the answer, as reasoning-gym does
    return 0.0 if answer is None else _antiderivative_score(answer, metadata)


def score_intermediate_integration(
    dataset: Any, answer: str | None, entry: dict[str, Any]
) -> float:
    """As ``score_simple_integration``, for an answer that is a text (not only not None)."""
    metadata = entry["metadata"]
    return _antiderivative_score(answer, metadata) if isinstance(answer, str) else 0.0


def _antiderivative_score(answer: str, metadata: dict[str, Any]) -> float:
    """The integration datasets' check: ``C`` and the variable are the answer's own
    symbols, and ``simplify(derivative - integrand) == 0``."""
    try:
        variable = metadata["variable"]
        x = sympy.Symbol(variable)
        derivative = sympy.diff(expression(answer, {variable: x, "C": sympy.Symbol("C")}), x)
        integrand = expression(metadata["integrand"], {variable: x})
        return 1.0 if sympy.simplify(derivative - integrand) == 0 else 0.0
    except Exception:
        return 0.0


SCORERS: dict[str, Callable[[Any, str | None, dict[str, Any]], float]] = {
    "puzzle24": score_puzzle24,
    "countdown": score_countdown,
    "polynomial_multiplication": score_polynomial_multiplication,
    "simple_integration": score_simple_integration,
    "intermediate_integration": score_intermediate_integration,
}
"""Wander's scorer of each dataset whose own would evaluate the answer."""
