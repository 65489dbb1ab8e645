"""Tic-tac-toe rules and a precomputed minimax table.

A board is a 9-character string, row-major cells 0..8, ``X``, ``O`` or ``.``.
The whole game tree (a few thousand positions for either first player) is
solved once per process, on first use, so choosing an optimal move is a
dictionary lookup.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Literal, NamedTuple

Player = Literal["X", "O"]
Outcome = Literal["X", "O", "draw"]

EMPTY = "."
EMPTY_BOARD = EMPTY * 9
LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),
    (0, 3, 6), (1, 4, 7), (2, 5, 8),
    (0, 4, 8), (2, 4, 6),
)  # fmt: skip


def other(player: Player) -> Player:
    return "O" if player == "X" else "X"


@functools.cache  # at most 3^9 boards
def winner(board: str) -> Outcome | None:
    """``X`` or ``O`` if that player has a line, ``draw`` if the board is full, else None."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]  # type: ignore[return-value]
    return "draw" if EMPTY not in board else None


@functools.cache  # at most 3^9 boards
def legal_moves(board: str) -> tuple[int, ...]:
    return tuple(cell for cell, mark in enumerate(board) if mark == EMPTY)


def place(board: str, cell: int, player: Player) -> str:
    return board[:cell] + player + board[cell + 1 :]


class Solution(NamedTuple):
    """The solved game, keyed by (board, player to move)."""

    scores: dict[tuple[str, Player], int]
    optimal: dict[tuple[str, Player], tuple[int, ...]]
    """Every optimal move of a game still in progress."""


@functools.cache
def _solved() -> Solution:
    """Minimax over every position reachable from the empty board, either player first.

    Solved on first use, once per process, so that importing the environment (the
    CLI, the client) does not pay for it.

    Scores are from the point of view of the player to move: 0 for a draw, and
    for a win or a loss ``1 +`` the cells still empty when it happens, so that
    among winning moves the quickest is optimal and among losing ones the
    slowest: the opponent takes a win that is on the board instead of dawdling.
    """
    scores: dict[tuple[str, Player], int] = {}
    best: dict[tuple[str, Player], tuple[int, ...]] = {}

    def score(board: str, player: Player) -> int:
        key = (board, player)
        if key in scores:
            return scores[key]
        result = winner(board)
        if result is not None:
            # The previous mover made the line, or the board is full.
            scores[key] = 0 if result == "draw" else -(1 + board.count(EMPTY))
            return scores[key]
        scored = [(-score(place(board, m, player), other(player)), m) for m in legal_moves(board)]
        top = max(value for value, _ in scored)
        scores[key] = top
        best[key] = tuple(m for value, m in scored if value == top)
        return top

    score(EMPTY_BOARD, "X")
    score(EMPTY_BOARD, "O")
    return Solution(scores, best)


def optimal_moves(board: str, player: Player) -> tuple[int, ...]:
    """All minimax-optimal moves of ``player`` on ``board`` (a game still in progress)."""
    return _solved().optimal[(board, player)]


def position_value(board: str, player: Player) -> int:
    """Minimax value for ``player`` to move: 1 forced win, 0 draw, -1 forced loss."""
    score = _solved().scores[(board, player)]
    return (score > 0) - (score < 0)


def positions(player: Player) -> list[str]:
    """Every reachable position of a game in progress with ``player`` to move."""
    return [board for board, mover in _solved().optimal if mover == player]


CELL_PREFERENCE = (4, 0, 2, 6, 8, 1, 3, 5, 7)
"""The centre, the corners, the edges: how ``likeliest_win`` settles its last ties."""


@functools.cache
def win_chance(board: str, player: Player) -> Fraction:
    """X's chance of a win from ``board``, ``player`` to move, when X plays
    ``likeliest_win`` and O plays uniformly at random; exact, so that moves alike by
    symmetry tie exactly."""
    result = winner(board)
    if result is not None:
        return Fraction(result == "X")
    if player == "X":
        return max(win_chance(place(board, m, "X"), "O") for m in optimal_moves(board, "X"))
    moves = legal_moves(board)
    return sum((win_chance(place(board, m, "O"), "X") for m in moves), Fraction()) / len(moves)


def likeliest_win(board: str) -> int:
    """X's optimal move likeliest to win against an opponent playing at random, the
    rest of the tie settled by ``CELL_PREFERENCE``: never loses, and against a random
    opponent wins 96% of games (either first), where any optimal move wins 87%. The
    client's minimax baseline plays it with ``ties="wins"``."""
    chances = {m: win_chance(place(board, m, "X"), "O") for m in optimal_moves(board, "X")}
    top = max(chances.values())
    return min((m for m, chance in chances.items() if chance == top), key=CELL_PREFERENCE.index)
