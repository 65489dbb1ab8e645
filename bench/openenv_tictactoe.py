"""The comparison for the WebSocket bench: tic-tac-toe on OpenEnv 0.10's own server.

An in-memory game with the work of Wander's tictactoe against the random opponent
(parse ``<move>N</move>``, place X, the opponent answers with a random legal O, check
for a winner), hosted by ``openenv.core.env_server.create_fastapi_app`` with 64
concurrent sessions, so the load generator plays the same frames against both servers.
The observation carries ``info.board`` as Wander's does. Nothing is stored: an OpenEnv
session lives in the server's memory and dies with its socket.

It runs in the openenv 0.10 venv (openenv cannot share Wander's venv), so it imports
only openenv and the standard library:

    python -m uvicorn bench.openenv_tictactoe:app --port 8001
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

# openenv is installed in the interop venv only (tests/interop.py), not in the dev venv.
from openenv.core.env_server import (  # pyright: ignore[reportMissingImports]
    Action,
    Environment,
    Observation,
    State,
    create_fastapi_app,
)
from pydantic import Field

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MOVE = re.compile(r"<move>\s*(\d)\s*</move>")


class ReplyAction(Action):
    content: str = Field(description="the model's reply")


class BoardObservation(Observation):
    prompt: str = ""
    info: dict[str, Any] = Field(default_factory=dict)


def winner(board: str) -> str | None:
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


class TicTacToe(Environment):  # type: ignore[misc]
    """The model plays X, a random opponent O; reward 1 win, 0.5 draw, 0 loss, -0.1 bad move."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)
        self.board = "." * 9
        self.rng = random.Random()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> Any:
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        self.board, self.rng = "." * 9, random.Random(seed)
        return self._observe(reward=None, done=False)

    def step(self, action: ReplyAction, timeout_s: float | None = None, **_: Any) -> Any:
        self._state.step_count += 1
        match = MOVE.search(action.content)
        cell = int(match.group(1)) if match else -1
        if not 0 <= cell < 9 or self.board[cell] != ".":
            return self._observe(reward=-0.1, done=False)
        board = self._place(cell, "X")
        if winner(board) == "X" or "." not in board:
            return self._observe(reward=1.0 if winner(board) else 0.5, done=True)
        reply = self.rng.choice([i for i, mark in enumerate(board) if mark == "."])
        board = self._place(reply, "O")
        if winner(board) == "O":
            return self._observe(reward=0.0, done=True)
        return self._observe(reward=0.5 if "." not in board else 0.0, done="." not in board)

    def _place(self, cell: int, mark: str) -> str:
        self.board = self.board[:cell] + mark + self.board[cell + 1 :]
        return self.board

    def _observe(self, reward: float | None, done: bool) -> BoardObservation:
        rows = "\n".join(self.board[i : i + 3] for i in (0, 3, 6))
        return BoardObservation(
            prompt=f"{rows}\nYour move (X): <move>0-8</move>",
            info={"board": self.board},
            reward=reward,
            done=done,
            metadata={"turn": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


app = create_fastapi_app(TicTacToe, ReplyAction, BoardObservation, max_concurrent_envs=64)
