"""Tic-tac-toe agents for tests: each maps a board to the model's message."""

from __future__ import annotations

import random
from collections.abc import Callable

from service.envs.tictactoe.game import legal_moves, optimal_moves

Agent = Callable[[str], str]


def answer(cell: int | str, think: str = "thinking") -> str:
    return f"<think>{think}</think><move>{cell}</move>"


def perfect_agent(board: str) -> str:
    return answer(optimal_moves(board, "X")[0])


def random_agent(seed: int) -> Agent:
    rng = random.Random(seed)
    return lambda board: answer(rng.choice(legal_moves(board)))
