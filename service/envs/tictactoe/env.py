"""The ``tictactoe`` environment: the model plays X against a tunable O.

Its config, rewards and metrics are in docs/environments.md, "tictactoe".
"""

from __future__ import annotations

import functools
import random
from typing import Any, Literal

from pydantic import Field, model_validator

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
    last_tagged,
    stable_hash,
    without_tagged,
)
from wander.service.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    legal_moves,
    optimal_moves,
    place,
    winner,
)

SYSTEM_PROMPT = """\
You are playing tic-tac-toe as X against an opponent who plays O.
The cells are numbered 0 to 8, row by row:

 0 | 1 | 2
---+---+---
 3 | 4 | 5
---+---+---
 6 | 7 | 8

On each turn, reason briefly inside <think>...</think>, then give the number of \
an empty cell inside <move>...</move>, for example: <think>The centre is free.</think><move>4</move>
Three X in a row, column or diagonal wins."""


WIN, DRAW, LOSS = 1.0, 0.5, 0.0
INVALID_MOVE_PENALTY = -0.1


class TicTacToeConfig(SizedConfig):
    min_random_move_prob: float = Field(
        0.0, ge=0.0, le=1.0, description="Lowest chance that the opponent plays a random move."
    )
    max_random_move_prob: float = Field(
        1.0, ge=0.0, le=1.0, description="Highest chance that the opponent plays a random move."
    )
    num_groups: int = Field(
        1,
        ge=1,
        description="Difficulty strata: example i draws its random-move probability inside "
        "stratum i mod num_groups, so any num_groups consecutive examples span the range.",
    )
    max_turns: int = Field(
        8, ge=1, le=64, description="Model messages allowed, invalid ones included; then a loss."
    )

    @model_validator(mode="after")
    def _ordered_range(self) -> TicTacToeConfig:
        if self.min_random_move_prob > self.max_random_move_prob:
            raise ValueError("min_random_move_prob must not exceed max_random_move_prob")
        return self


def random_move_prob(config: TicTacToeConfig, split: str, index: int) -> float:
    """Example ``index``'s opponent: p drawn inside stratum ``index mod num_groups``."""
    lo, hi = config.min_random_move_prob, config.max_random_move_prob
    width = (hi - lo) / config.num_groups
    stratum = index % config.num_groups
    if width == 0.0:
        # One difficulty: no draw moves p (this is lo + 0 * (stratum + draw) to the bit),
        # and seeding the draw's generator would be a large share of making an example.
        return lo + width * stratum
    # Salted apart from the example seed so that overriding an episode's seed
    # changes who starts and the opponent's draws, never the example's difficulty.
    draw = random.Random(
        stable_hash(TicTacToe.name, "random_move_prob", split, config.seed, index)
    ).random()
    return lo + width * (stratum + draw)


@functools.cache  # at most 3^9 boards, and rendering each anew is a visible part of a step
def render_board(board: str) -> str:
    """The board with X, O and the numbers of the empty cells."""
    cells = [mark if mark != EMPTY else str(i) for i, mark in enumerate(board)]
    rows = [" " + " | ".join(cells[r : r + 3]) for r in (0, 3, 6)]
    return "\n---+---+---\n".join(rows)


def formatted(content: str | None) -> bool:
    """Whether ``content`` is ``<think>...</think>`` with a thought in it (not only
    blanks: an empty thought earns no format credit, or a model would learn to think
    nothing), then a ``<move>...</move>`` that ends it: a full match of
    ``\\s*<think>\\s*\\S.*?</think>.*?<move>.*?</move>\\s*`` (the thought up to the first
    ``</think>``), found in linear time (the expression backtracks quadratically in the
    number of ``<move>`` tags, and this environment runs inline, on the service's event
    loop)."""
    text = (content or "").strip()
    if not (text.startswith("<think>") and text.endswith("</move>")):
        return False
    thought = text.find("</think>", len("<think>"))
    if thought < 0 or not text[len("<think>") : thought].strip():
        return False
    move = text.find("<move>", thought + len("</think>"))
    return move >= 0 and move + len("<move>") <= len(text) - len("</move>")


def parse_move(content: str | None) -> int | str:
    """The cell of the last ``<move>`` tag outside ``<think>``, or why there is none."""
    move = last_tagged(without_tagged(content or "", "think"), "move")
    if move is None:
        return "no <move>N</move> tag found"
    text = move.strip()
    if not (text.isascii() and text.isdigit()) or int(text) > 8:
        return f"{text[:20]!r} is not a cell number from 0 to 8"
    return int(text)


class TicTacToe(Environment[TicTacToeConfig]):
    name = "tictactoe"
    version = "1.1.0"  # 1.1: an empty thought earns no format credit
    description = (
        "Tic-tac-toe: the model plays X against an opponent that plays randomly with a "
        "per-example probability and minimax-optimally otherwise."
    )
    kind = "multi_turn"
    isolation = "inline"  # pure, and linear in the action: see formatted() and parse_move()
    Config = TicTacToeConfig
    reward_weights = {"win": 1.0, "format": 0.2, "invalid_move": 1.0}

    def examples(self, config: TicTacToeConfig, split: str) -> GeneratedExamples[dict[str, float]]:
        size = config.split_size(split)
        return GeneratedExamples(
            size, lambda i: {"random_move_prob": random_move_prob(config, split, i)}
        )

    def reset(self, config: TicTacToeConfig, example: dict[str, float], seed: int) -> Reset:
        model_starts = random.Random(seed).random() < 0.5
        p = example["random_move_prob"]
        board = EMPTY_BOARD
        if model_starts:
            news = "You play first."
        else:
            cell = _opponent_move(board, p, TurnRandom(seed))
            board = place(board, cell, "O")
            news = opponent_played(cell, first=True)
        state: State = {
            "board": board,
            "model_starts": model_starts,
            "random_move_prob": p,
            "max_turns": config.max_turns,
            "turns": 0,
            "invalid_moves": 0,
            "formatted": 0,
            "winner": None,
        }
        return Reset(state, opening(news, board))

    def step(
        self, config: TicTacToeConfig, state: State, action: Message, rng: TurnRandom
    ) -> Transition:
        content = action.get("content")
        state = {
            **state,
            "turns": state["turns"] + 1,
            "formatted": state["formatted"] + formatted(content),
        }
        board = state["board"]
        move = parse_move(content)
        if isinstance(move, int) and board[move] != EMPTY:
            move = f"cell {move} is already taken"
        if isinstance(move, str):
            state["invalid_moves"] += 1
            return self._reply(state, f"Invalid move: {move}.", board)._replace(invalid=True)

        board = place(board, move, "X")
        if winner(board) is not None:
            return self._reply(state, f"You played {move}.", board)
        cell = _opponent_move(board, state["random_move_prob"], rng)
        return self._reply(state, opponent_played(cell), place(board, cell, "O"))

    def _reply(self, state: State, news: str, board: str) -> Transition:
        result = winner(board)
        state["board"], state["winner"] = board, result
        if result is None and state["turns"] < state["max_turns"]:
            return Transition(state, [{"role": "user", "content": your_turn(news, board)}], False)
        ending = {
            "X": "You win!",
            "O": "The opponent wins.",
            "draw": "It's a draw.",
            None: f"The limit of {state['max_turns']} turns was reached: it counts as a loss.",
        }[result]
        content = f"{news}\n\n{render_board(board)}\n\nGame over. {ending}"
        return Transition(state, [{"role": "user", "content": content}], True)

    def score(self, config: TicTacToeConfig, state: State) -> Score:
        outcome = _outcome(state)
        turns = state["turns"]
        components = {
            "win": {"win": WIN, "draw": DRAW, "loss": LOSS, None: 0.0}[outcome],
            "format": state["formatted"] / turns if turns else 0.0,
            "invalid_move": INVALID_MOVE_PENALTY if state["invalid_moves"] else 0.0,
        }
        metrics = {
            "outcome": outcome,
            "invalid_moves": state["invalid_moves"],
            "turns": turns,
            "model_starts": state["model_starts"],
            "random_move_prob": state["random_move_prob"],
        }
        return Score(components, metrics, outcome)

    def public_state(self, state: State) -> dict[str, Any]:
        keys = ("board", "winner", "model_starts", "random_move_prob", "invalid_moves", "max_turns")
        return {key: state[key] for key in keys}


def _outcome(state: State) -> Literal["win", "draw", "loss"] | None:
    result = state["winner"]
    if result == "X":
        return "win"
    if result == "draw":
        return "draw"
    if result == "O" or state["turns"] >= state["max_turns"]:
        return "loss"
    return None


def _opponent_move(board: str, random_move_prob: float, rng: TurnRandom) -> int:
    """A uniformly random legal move with probability p, else a uniformly chosen optimal one.

    The turn's generator is seeded only where its draws can change the move: seeding a
    ``random.Random`` is a fifth of a step (bench/README.md), and a
    forced reply (the last empty cell, or the only optimal move of an opponent that never
    plays randomly) needs none. The generator is fresh each turn, so skipping it
    changes no later draw.
    """
    legal, optimal = legal_moves(board), optimal_moves(board, "O")
    if len(legal) == 1 or (random_move_prob <= 0.0 and len(optimal) == 1):
        return optimal[0]  # random() < p never holds for p <= 0: the draws would not matter
    draws = rng.at(board)
    return draws.choice(legal if draws.random() < random_move_prob else optimal)


def opening(news: str, board: str) -> list[Message]:
    """An episode's first messages: the system prompt, then the first request for a move."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": your_turn(news, board)},
    ]


def opponent_played(cell: int, first: bool = False) -> str:
    """The news of the opponent's move to ``cell``."""
    return (
        f"The opponent (O) played first, in cell {cell}."
        if first
        else f"The opponent (O) played {cell}."
    )


def your_turn(news: str, board: str) -> str:
    """The message that asks for a move on ``board``, after ``news`` of the last one."""
    return f"{news}\n\n{_position(board)}\nYour turn."


@functools.cache
def _position(board: str) -> str:
    available = ", ".join(map(str, legal_moves(board)))
    return f"{render_board(board)}\n\nAvailable positions: {available}"
