"""Inline environments parse actions in linear time: tic-tac-toe runs on the event
loop, and its regular expressions backtracked quadratically (``<move>`` x 8000 held
the loop 3 s). The linear parsers find exactly what the expressions found. How long
they take, against the expressions, is measured by ``python -m bench.timings``."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from tests.helpers import create, step
from wander.sdk import is_tagged_answer, last_tagged, without_tagged
from wander.service.envs.reverse_text.env import extract_answer
from wander.service.envs.tictactoe.env import formatted, parse_move

FORMAT = re.compile(
    r"\s*<think>(?:(?!</think>).)*?(?:(?!</think>)\S)(?:(?!</think>).)*?</think>.*?<move>.*?</move>\s*",
    re.DOTALL,
)
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
MOVE = re.compile(r"<move>(.*?)</move>", re.DOTALL)
TOKENS = ("<think>", "</think>", "<move>", "</move>", " ", "\n", "4", "x", "<", "/", ">")


def test_the_linear_parsers_find_what_the_expressions_found() -> None:
    rng = random.Random(20)
    for _ in range(50_000):
        text = "".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 10)))
        moves = MOVE.findall(text)
        assert formatted(text) == bool(FORMAT.fullmatch(text)), text
        assert without_tagged(text, "think") == THINK.sub("", text), text
        assert last_tagged(text, "move") == (moves[-1] if moves else None), text


ANSWER_TOKENS = ("<answer>", "</answer>", "<think>", "</think>", " ", "\n", "4", "<", ">")
REVERSED_TOKENS = ("<reversed_text>", "</reversed_text>", "<think>", "</think>", "\n", " ", "a")


@pytest.mark.parametrize(
    ("tag", "tokens"), [("answer", ANSWER_TOKENS), ("reversed_text", REVERSED_TOKENS)]
)
def test_the_answer_format_is_what_the_expression_matched(tag: str, tokens: tuple[str]) -> None:
    """double_check and reverse_text: an answer, after an optional thought, and nothing else."""
    expression = re.compile(rf"\s*(<think>.*?</think>\s*)?<{tag}>.*?</{tag}>\s*", re.DOTALL)
    rng = random.Random(20)
    for _ in range(50_000):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(0, 10)))
        assert is_tagged_answer(text, tag) == bool(expression.fullmatch(text)), text


def test_reverse_text_finds_the_answer_the_expression_found() -> None:
    expression = re.compile(r"<reversed_text>\n?(.*?)\n?</reversed_text>", re.DOTALL)
    rng = random.Random(20)
    for _ in range(50_000):
        text = "".join(rng.choice(REVERSED_TOKENS) for _ in range(rng.randint(0, 10)))
        found = expression.findall(text)
        assert extract_answer(text) == (found[-1] if found else ""), text


HOSTILE = (
    "<move>" * 80_000,
    "<think>" * 80_000,
    "<think></think>" + "<move>" * 80_000,
    "<think></think><move>" * 30_000,
)
"""Ten times the sizes that held the loop for seconds: on the expressions, minutes to
hours (bench/README.md); the tests' timeouts are hang guards, not speed targets."""


@pytest.mark.timeout(10)
@pytest.mark.parametrize("content", HOSTILE, ids=["moves", "thinks", "think-moves", "pairs"])
def test_hostile_actions_are_parsed_as_no_move(content: str) -> None:
    assert formatted(content) is False
    assert parse_move(content) == "no <move>N</move> tag found"


@pytest.mark.timeout(10)
async def test_a_hostile_step_is_answered_as_an_invalid_move(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, example=0)
    response = await step(api, episode["id"], "<think></think>" + "<move>" * 8000, 0)
    assert response.status_code == 200, response.text
