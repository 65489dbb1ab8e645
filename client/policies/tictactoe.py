"""Tic-tac-toe baselines that read the board from the conversation, as a model would.

The client never imports the service, so the baseline has a small solver of its
own; the test suite checks it against the environment's opponent.
"""

from __future__ import annotations

import copy
import functools
import random
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal, Self

from wander.client.models import AssistantMessage, Message

BOARD_ROW = re.compile(r"^ (\S) \| (\S) \| (\S)$", re.MULTILINE)
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


class NotATicTacToePrompt(ValueError):
    """The conversation shows no tic-tac-toe board."""


def read_board(messages: Sequence[Message]) -> str:
    """The board of the last user message: 9 cells ``X``, ``O`` or ``.``."""
    for message in reversed(messages):
        if message.role == "user" and message.content:
            rows = BOARD_ROW.findall(message.content)
            if len(rows) >= 3:
                cells = [cell for row in rows[-3:] for cell in row]
                return "".join(cell if cell in "XO" else "." for cell in cells)
    raise NotATicTacToePrompt("no tic-tac-toe board in the conversation")


def _line_winner(board: str) -> str | None:
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def _free_cells(board: str) -> list[int]:
    return [i for i, cell in enumerate(board) if cell == "."]


def _placed(board: str, cell: int, player: str) -> str:
    return board[:cell] + player + board[cell + 1 :]


@functools.cache
def _negamax(board: str, player: str) -> int:
    """Outcome for ``player`` to move with best play: >0 win (sooner is larger), 0 draw."""
    if _line_winner(board):
        return -(1 + board.count("."))  # the opponent just completed a line
    free = _free_cells(board)
    if not free:
        return 0
    opponent = "O" if player == "X" else "X"
    return max(-_negamax(_placed(board, i, player), opponent) for i in free)


def best_moves(board: str, player: str = "X") -> list[int]:
    """Every move that keeps ``player``'s minimax-best outcome."""
    opponent = "O" if player == "X" else "X"
    scored = {i: -_negamax(_placed(board, i, player), opponent) for i in _free_cells(board)}
    top = max(scored.values())
    return [i for i, value in scored.items() if value == top]


CELL_PREFERENCE = (4, 0, 2, 6, 8, 1, 3, 5, 7)
"""The centre, the corners, the edges: the order ``ties="wins"`` settles what is still
tied after the chances of a win, so that one position has one answer."""


@functools.cache
def _win_chance(board: str, player: str) -> Fraction:
    """The chance that X wins from ``board``, ``player`` to move, when X plays the
    minimax-best move likeliest to win and O plays uniformly at random; exact, so that
    moves alike by symmetry tie exactly."""
    won = _line_winner(board)
    if won or "." not in board:
        return Fraction(won == "X")
    if player == "X":
        return max(_win_chance(_placed(board, i, "X"), "O") for i in best_moves(board))
    free = _free_cells(board)
    return sum((_win_chance(_placed(board, i, "O"), "X") for i in free), Fraction()) / len(free)


def likeliest_win(board: str) -> int:
    """X's minimax-best move that wins most often against an opponent playing at
    random, the rest of the tie settled by ``CELL_PREFERENCE``."""
    chances = {i: _win_chance(_placed(board, i, "X"), "O") for i in best_moves(board)}
    top = max(chances.values())
    return min((i for i, chance in chances.items() if chance == top), key=CELL_PREFERENCE.index)


def _completes_line(board: str, cell: int, player: str) -> bool:
    return _line_winner(_placed(board, cell, player)) == player


def _explain(board: str, cell: int) -> str:
    """A short reason for playing ``cell`` as X, for readable (and SFT-worthy) transcripts."""
    if _completes_line(board, cell, "X"):
        return f"Cell {cell} completes a line of X: I win."
    if _completes_line(board, cell, "O"):
        return f"O would complete a line at {cell}, so I block it."
    if board.count(".") == 9:
        return f"The board is empty; {cell} is as good as any opening."
    outcome = {True: "a win", False: "at least a draw"}[_negamax(board, "X") > 0]
    return f"No line to finish or block; {cell} keeps {outcome}."


def _answer(board: str, think: str, cell: int) -> str:
    """The answer for ``cell``, its thought opening with the free cells as the prompt
    lists them: a model trained on these transcripts learns to copy that list and to
    pick its move from what it just wrote. A tiny model shown only the reason named a
    taken cell as often as a random guess would (bench/README.md, "Learning")."""
    free = ", ".join(map(str, _free_cells(board)))
    return f"<think>Available: {free}. {think}</think>\n<move>{cell}</move>"


class Baseline:
    """What the baselines share: the environments they can play, and their random
    choices, from one generator per episode when seeded (``for_episode``), so that a
    seeded evaluation repeats whatever order its concurrent episodes run in."""

    plays: ClassVar[frozenset[str]] = frozenset({"tictactoe", "tictactoe_move"})
    """The environments a baseline can play (``policies.base.plays``)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def for_episode(self, example: int, rollout: int) -> Self:
        """The player of one episode: with a seed, one seeded by the example and the
        rollout too; without one, this one."""
        return self if self.seed is None else self.seeded(example, rollout)

    def seeded(self, *key: int) -> Self:
        """A copy whose generator is seeded by the baseline's seed and ``key``."""
        player = copy.copy(self)
        player.rng = random.Random(repr((self.seed, *key)))
        return player


class MinimaxPolicy(Baseline):
    """Plays X minimax-optimally; with probability ``noise`` a uniformly random legal
    move instead.

    ``ties`` chooses among the minimax-best moves: ``"random"`` any of them at random;
    ``"wins"`` always the one likeliest to win against an opponent playing at random
    (``likeliest_win``). Both never lose; against a random opponent, random ties win
    87% of games, ``"wins"`` 96% (half the games with the opponent first), and a
    model taught by ``"wins"`` meets 383 positions where random ties lead to 3,052."""

    def __init__(
        self,
        noise: float = 0.0,
        seed: int | None = None,
        ties: Literal["random", "wins"] = "random",
    ) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError("noise must be between 0 and 1")
        if ties not in ("random", "wins"):
            raise ValueError("ties must be 'random' or 'wins'")
        super().__init__(seed)
        self.noise = noise
        self.ties = ties

    def answer(self, board: str) -> str:
        """The reasoned move for ``board`` (9 cells ``X``, ``O``, ``.``), as ``act`` sends it."""
        if self.rng.random() < self.noise:
            cell = self.rng.choice(_free_cells(board))
            return _answer(board, "I try something different.", cell)
        cell = likeliest_win(board) if self.ties == "wins" else self.rng.choice(best_moves(board))
        return _answer(board, _explain(board, cell), cell)

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        return AssistantMessage(content=self.answer(read_board(messages)))


class RandomPolicy(Baseline):
    """Plays a uniformly random empty cell."""

    def answer(self, board: str) -> str:
        """A random empty cell of ``board``, as ``act`` sends it."""
        cell = self.rng.choice(_free_cells(board))
        return _answer(board, "Any free cell will do.", cell)

    async def act(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        return AssistantMessage(content=self.answer(read_board(messages)))
