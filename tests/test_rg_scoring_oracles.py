"""Wander's scorers for the datasets that ``eval`` their own text give the datasets'
scores (rg_scoring/oracles.py): 200 examples each, the right answer and a corpus of
wrong and malformed ones, against reasoning-gym's own ``score_answer``."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
import reasoning_gym

from wander.service.envs.rg_scoring.oracles import SCORERS

EXAMPLES = 200


@cache
def dataset(name: str) -> Any:
    return reasoning_gym.create_dataset(name, seed=7, size=EXAMPLES)


def bitwise_corpus(item: dict[str, Any]) -> list[str | None]:
    value = int(item["answer"], 16)
    return [
        item["answer"], str(value), bin(value), oct(value), f" {item['answer']} ",
        item["answer"].upper(), hex(value + 1), hex(-value), f"{value:_}", "0x", "",
        None, "hello", "1e3", "0x1.5", "9" * 5000, f"({item['answer']})",
    ]  # fmt: skip


def sorting_corpus(item: dict[str, Any]) -> list[str | None]:
    numbers = [float(n) for n in json.loads(item["answer"].replace("'", '"'))]
    as_text = [str(n) for n in numbers]
    return [
        item["answer"], json.dumps(as_text), json.dumps(numbers), json.dumps(numbers[::-1]),
        json.dumps([n + 0.5 for n in numbers]), json.dumps([n + 2 for n in numbers]),
        json.dumps(numbers[:-1]), json.dumps(sorted(numbers)), "[]", "{}", "7", "", None,
        "hello", "[1, 2", str(numbers), "['a', 'b']", "[" * 5000 + "]" * 5000,
    ]  # fmt: skip


CORPORA = {"bitwise_arithmetic": bitwise_corpus, "number_sorting": sorting_corpus}


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_the_same_scores_as_reasoning_gym(name: str) -> None:
    data, ours = dataset(name), SCORERS[name]
    seen = set()
    for item in data:
        for answer in CORPORA[name](item):
            expected = data.score_answer(answer, item)
            assert ours(data, answer, item) == expected, (answer, item["answer"])
            seen.add(expected)
    assert seen == {0.0, 1.0}
