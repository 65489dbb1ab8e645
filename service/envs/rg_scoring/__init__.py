"""Wander's own scorers for the reasoning-gym datasets whose scorer evaluates the answer.

Four datasets hand the model's answer to ``eval`` and five to sympy's ``parse_expr``: a
model's answer would run as code, and one naming the scorer's own variables
(``oracle_answer``) earned partial credit. Each of those is scored here by a parser that
reads only what the answer may be (Python literals in ``literals``, arithmetic and
algebra in ``expressions``) and gives the dataset's own scores: the same number for every
answer within the parser's grammar and caps, its "unreadable" score for the rest. Two more
``eval`` their own stored text at every score (``oracles``), which the worker's guard
refuses like any other evaluation. ``tests/test_rg_scoring_*.py`` compare each with
reasoning-gym's scorer on hundreds of examples; ``tests/test_no_evaluation.py`` is the
audit that finds which datasets need one. One more scorer rewards every answer
(``unearned``): it is replaced too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wander.service.envs.rg_scoring import expression_scorers, literals, oracles, unearned

Scorer = Callable[[Any, "str | None", dict[str, Any]], float]
"""``score(dataset, answer, entry)``: the dataset's ``score_answer(answer, entry)``."""

SCORERS: dict[str, Scorer] = {
    **literals.SCORERS,
    **expression_scorers.SCORERS,
    **oracles.SCORERS,
    **unearned.SCORERS,
}
"""Dataset name -> Wander's scorer, for every dataset whose own scorer evaluates text or
rewards answers that do not do the task."""
