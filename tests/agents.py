"""Tic-tac-toe agents for tests: each maps a board to the model's message."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from wander.client import Message
from wander.client.policies.tictactoe import read_board
from wander.service.envs.tictactoe.game import legal_moves, optimal_moves
from wander.trainer.backends import Generation

Agent = Callable[[str], str]


def answer(cell: int | str, think: str = "thinking") -> str:
    return f"<think>{think}</think><move>{cell}</move>"


def perfect_agent(board: str) -> str:
    return answer(optimal_moves(board, "X")[0])


def random_agent(seed: int) -> Agent:
    rng = random.Random(seed)
    return lambda board: answer(rng.choice(legal_moves(board)))


class ScriptedBackend:
    """Answers like ``agent`` (the minimax baseline), reading the board the service last
    sent (the prompt's last one), each answer ended by ``end`` (the tokenizer's EOS)."""

    def __init__(
        self, tokenizer: Any, agent: Agent = perfect_agent, end: int | None = None
    ) -> None:
        self.tokenizer, self.agent = tokenizer, agent
        self.end = tokenizer.eos_token_id if end is None else end
        self.generated: list[list[int]] = []
        self.batch_sizes: list[int] = []

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        """The scripted answers, whole, however long: the rollout keeps a turn within what
        is left of the completion (``max_tokens`` is asked of a model, not promised)."""
        self.batch_sizes.append(len(prompts))
        out = []
        for prompt in prompts:
            board = read_board([Message(role="user", content=self.tokenizer.decode(prompt))])
            ids = self.tokenizer.encode(self.agent(board), add_special_tokens=False)
            ids.append(self.end)
            self.generated.append(ids)
            out.append(Generation(ids, [-0.5] * len(ids)))
        return out
