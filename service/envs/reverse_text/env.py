"""``reverse_text`` (single-turn): reverse a paragraph, character by character."""

from __future__ import annotations

import json
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import cache
from importlib.resources import files
from typing import Any

from wander.sdk import (
    EnvConfig,
    Environment,
    Message,
    Reset,
    Score,
    State,
    Transition,
    TurnRandom,
    is_tagged_answer,
    last_tagged,
    stable_hash,
)

SYSTEM_PROMPT = (
    "Reverse the text you are given, character by character: its last character "
    "comes first. You may think inside <think>...</think> first; then give the "
    "reversed text, and nothing else, inside <reversed_text>...</reversed_text>."
)
TAG = "reversed_text"
SCORED_LENGTH = 2
"""The most of an answer that is scored, in multiples of the text's length (see lcs_ratio)."""
EVAL_SHARE = 10
"""One paragraph in ten (by a stable hash of its text) is held out for ``eval``."""


@cache
def paragraphs() -> dict[str, tuple[str, ...]]:
    """The shipped paragraphs (see SOURCE.md), split by a stable hash of their text."""
    lines = files(__package__).joinpath("paragraphs.jsonl").read_text("utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line]
    held_out = [stable_hash("reverse_text/split", text) % EVAL_SHARE == 0 for text in texts]
    return {
        "train": tuple(t for t, out in zip(texts, held_out, strict=True) if not out),
        "eval": tuple(t for t, out in zip(texts, held_out, strict=True) if out),
    }


def lcs_ratio(answer: str, target: str) -> float:
    """Similarity in [0, 1] from the longest matching blocks: difflib's ratio,
    ``2 * matched / (len(answer) + len(target))``.

    Matching costs ``len(answer) * len(target)``, seconds for a long answer. So only
    the first ``SCORED_LENGTH`` times ``len(target)`` characters of the answer are
    matched, over its whole length: the ratio of any answer up to that length is
    difflib's exactly, and a longer one, which scores at most 2/3 anyway, scores on
    what its beginning matches."""
    scored = answer[: SCORED_LENGTH * len(target)]
    blocks = SequenceMatcher(None, scored, target, autojunk=False).get_matching_blocks()
    length = len(answer) + len(target)
    return 2.0 * sum(block.size for block in blocks) / length if length else 1.0


def extract_answer(content: str | None) -> str:
    """The last ``<reversed_text>`` answer, less a newline just inside each tag; "" if none:
    what ``<reversed_text>\\n?(.*?)\\n?</reversed_text>`` found last, in linear time."""
    found = last_tagged(content, TAG)
    return "" if found is None else found.removeprefix("\n").removesuffix("\n")


class ReverseText(Environment[EnvConfig]):
    name = "reverse_text"
    version = "1.1.0"  # 1.1: answers past twice the text scored on their beginning
    description = (
        "Single-turn: reverse a paragraph inside <reversed_text> tags; scored by its "
        "longest-common-subsequence ratio to the true reversal."
    )
    kind = "single_turn"
    Config = EnvConfig
    reward_weights = {"lcs": 1.0, "format": 0.2}

    def examples(self, config: EnvConfig, split: str) -> Sequence[str]:
        return paragraphs()[split]

    def reset(self, config: EnvConfig, example: str, seed: int) -> Reset:
        state: State = {"text": example, "answer": None}
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": example},
        ]
        return Reset(state, messages)

    def step(self, config: EnvConfig, state: State, action: Message, rng: TurnRandom) -> Transition:
        content = action.get("content")
        answer, formatted = extract_answer(content), is_tagged_answer(content, TAG)
        return Transition({**state, "answer": answer, "formatted": formatted}, [], True)

    def score(self, config: EnvConfig, state: State) -> Score:
        if state["answer"] is None:
            return Score(
                {"lcs": 0.0, "format": 0.0}, {"lcs_ratio": None, "chars": len(state["text"])}
            )
        ratio = lcs_ratio(state["answer"], state["text"][::-1])
        components = {"lcs": ratio, "format": 1.0 if state["formatted"] else 0.0}
        return Score(components, {"lcs_ratio": ratio, "chars": len(state["text"])})

    def public_state(self, state: State) -> dict[str, Any]:
        return {"text": state["text"], "answered": state["answer"] is not None}
