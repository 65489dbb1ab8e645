"""Scorers for datasets whose own scorer rewards answers that do not do the task.

``game_of_life_halting`` compares ``bool(answer)`` with ``bool(entry["answer"])``: the
stored answer is the text ``"True"`` or ``"False"``, both true to ``bool``, so any
non-empty answer scored 1.0 on every item. Here the answer must say what the question
asks for, ``True`` or ``False``, and be the right one.
"""

from __future__ import annotations

from typing import Any


def score_game_of_life_halting(dataset: Any, answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 when the answer is the expected ``True`` or ``False`` (case and surrounding
    quotes aside); 0.0 otherwise."""
    if answer is None:
        return 0.0
    said = answer.strip().strip("'\"").strip().lower()
    return 1.0 if said == str(entry["answer"]).strip().lower() else 0.0


SCORERS = {"game_of_life_halting": score_game_of_life_halting}
