"""``double_check`` (multi-turn): answer an arithmetic question, then answer "Are you sure?"."""

from __future__ import annotations

import random
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import Field

from wander.sdk import (
    Environment,
    GeneratedExamples,
    Message,
    Reset,
    Score,
    SizedConfig,
    State,
    Transition,
    TurnRandom,
    is_tagged_answer,
    last_tagged,
    stable_hash,
)

SYSTEM_PROMPT = (
    "Solve the arithmetic problem. You may reason inside <think>...</think>; then give "
    "the final answer, a number alone, inside <answer>...</answer>."
)
ARE_YOU_SURE = "Are you sure? Check your work and give your final answer again."
LEVELS = (1, 2, 3, 4)


class DoubleCheckConfig(SizedConfig):
    difficulty: Literal[1, 2, 3, 4] | None = Field(
        None,
        description="1: a + b; 2: products and differences; 3: three operations with "
        "brackets; 4: four operations with nested brackets. Unset: example i has level "
        "i mod 4 + 1.",
    )


def make_problem(level: int, rng: random.Random) -> tuple[str, int]:
    """An expression of ``level`` and its exact value (integers throughout)."""
    n = rng.randint
    if level == 1:
        a, b = n(1, 99), n(1, 99)
        return f"{a} + {b}", a + b
    if level == 2:
        a, b = n(12, 99), n(3, 19)
        return (f"{a} * {b}", a * b) if rng.random() < 0.5 else (f"{a * b} - {a}", a * b - a)
    if level == 3:
        a, b, c, d = n(2, 60), n(2, 60), n(2, 12), n(1, 99)
        return f"({a} + {b}) * {c} - {d}", (a + b) * c - d
    a, b, c, d, e = n(10, 99), n(2, 40), n(2, 9), n(2, 9), n(1, 500)
    return f"(({a} - {b}) * {c} + {e}) * {d}", ((a - b) * c + e) * d


def problem(config: DoubleCheckConfig, split: str, index: int) -> dict[str, Any]:
    """Example ``index``: a question, its exact answer and its level."""
    level = config.difficulty or LEVELS[index % len(LEVELS)]
    rng = random.Random(stable_hash("double_check", split, config.seed, index))
    question, answer = make_problem(level, rng)
    return {"question": f"What is {question}?", "answer": answer, "difficulty": level}


def parse_number(text: str | None) -> Decimal | None:
    """The number in an answer (``1,234``, `` 42 ``, ``-7.0``), or None."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "").replace(" ", "").rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


class DoubleCheck(Environment[DoubleCheckConfig]):
    name = "double_check"
    version = "1.0.0"
    description = (
        'Multi-turn: solve an arithmetic problem, then answer "Are you sure?"; '
        "scored on the final answer."
    )
    kind = "multi_turn"
    Config = DoubleCheckConfig
    reward_weights = {"correct": 1.0, "format": 0.2}

    def examples(self, config: DoubleCheckConfig, split: str) -> GeneratedExamples[dict[str, Any]]:
        size = config.split_size(split)
        return GeneratedExamples(size, lambda i: problem(config, split, i))

    def reset(self, config: DoubleCheckConfig, example: dict[str, Any], seed: int) -> Reset:
        state: State = {**example, "answers": [], "formatted": 0}
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": example["question"]},
        ]
        return Reset(state, messages)

    def step(
        self, config: DoubleCheckConfig, state: State, action: Message, rng: TurnRandom
    ) -> Transition:
        content = action.get("content")
        state = {
            **state,
            "answers": [*state["answers"], last_tagged(content, "answer")],
            "formatted": state["formatted"] + is_tagged_answer(content, "answer"),
        }
        if len(state["answers"]) == 1:
            return Transition(state, [{"role": "user", "content": ARE_YOU_SURE}], False)
        return Transition(state, [], True)

    def score(self, config: DoubleCheckConfig, state: State) -> Score:
        answers = [parse_number(a) == state["answer"] for a in state["answers"]]
        done = len(answers) == 2
        turns = len(answers)
        components = {
            "correct": 1.0 if done and answers[-1] else 0.0,
            "format": state["formatted"] / turns if turns else 0.0,
        }
        metrics = {
            "difficulty": state["difficulty"],
            "first_correct": answers[0] if answers else None,
            "final_correct": answers[-1] if done else None,
            "changed_answer": state["answers"][0] != state["answers"][1] if done else None,
        }
        return Score(components, metrics)

    def public_state(self, state: State) -> dict[str, Any]:
        return {
            "question": state["question"],
            "difficulty": state["difficulty"],
            "answers": state["answers"],
        }
