"""The ``tictactoe_move`` environment: one move of a game, scored by what it is worth.

A whole game's reward says whether the game was won, not which move won or lost it,
so GRPO credits every move of a game alike, and a tiny model shown a whole game's
conversation names cells that were free several messages ago. Here an episode is one
position of a game in progress, shown as ``tictactoe`` shows it (the same system
prompt, the same message), and the move is scored by the solved game: a model trained
here plays whole games of ``tictactoe`` when it is shown each turn's latest message
only (``LatestTurn`` in the client, ``wander eval --latest-turn``).

Its config, rewards and metrics are in docs/environments.md, "tictactoe_move".
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
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
    stable_hash,
)
from wander.service.envs.tictactoe.env import formatted, opening, opponent_played, parse_move
from wander.service.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    legal_moves,
    likeliest_win,
    optimal_moves,
    place,
    position_value,
    positions,
    win_chance,
    winner,
)

VALUES = {1: 1.0, 0: 0.5, -1: 0.0}
"""A move's ``value`` by what the game comes to with perfect play after it."""
INVALID_MOVE_PENALTY = -0.1


@functools.cache
def positions_by_marks() -> tuple[tuple[str, ...], ...]:
    """Every position of a game in progress with X to move, grouped by its number of
    marks (0 to 8), each group sorted: the same on every machine."""
    groups: dict[int, list[str]] = defaultdict(list)
    for board in positions("X"):
        groups[9 - board.count(EMPTY)].append(board)
    return tuple(tuple(sorted(groups[marks])) for marks in range(9))


def move_value(board: str, cell: int) -> int:
    """What X's move to ``cell`` comes to with perfect play after it: 1 won, 0 drawn,
    -1 lost."""
    after = place(board, cell, "X")
    result = winner(after)
    if result == "X":
        return 1
    if result == "draw":
        return 0
    return -position_value(after, "O")


class TicTacToeMoveConfig(SizedConfig):
    positions: Literal["marks", "played"] = Field(
        "marks",
        description="Which positions the examples are: `marks`, every position of a game in "
        "progress, example i drawn among those with i mod 9 marks; `played`, a turn of a game "
        "X plays with the optimal move likeliest to win against an opponent playing at random "
        "with a per-example probability (uniform in min_random_move_prob-max_random_move_prob), "
        "minimax-optimally otherwise: the positions a strong player meets, as often as it meets "
        "them.",
    )
    min_random_move_prob: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="With `played` positions, the lowest chance that the played games' "
        "opponent plays a random move.",
    )
    max_random_move_prob: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="With `played` positions, the highest chance that the played games' "
        "opponent plays a random move: lower, the positions strong opponents lead to weigh "
        "more (the talk's second stage trained against 0-0.25).",
    )
    endgame_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="With `played` positions, the share of examples that are a played game's "
        "last move, the board's one free cell, drawn among the played games that reach it "
        "(3% of played positions otherwise): a stratum to weigh where a model slips there.",
    )

    @model_validator(mode="after")
    def _played_options_are_played(self) -> TicTacToeMoveConfig:
        if self.endgame_share and self.positions != "played":
            raise ValueError("endgame_share applies to positions='played' only")
        if self.opponent != (0.0, 1.0) and self.positions != "played":
            raise ValueError("the random-move range applies to positions='played' only")
        if self.min_random_move_prob > self.max_random_move_prob:
            raise ValueError("min_random_move_prob must not exceed max_random_move_prob")
        return self

    @property
    def opponent(self) -> tuple[float, float]:
        """The played games' opponent: its random-move probability range."""
        return self.min_random_move_prob, self.max_random_move_prob


def played_position(draw: random.Random, opponent: tuple[float, float]) -> str:
    """One of X's turns, drawn uniformly, of a game ``played_turns`` plays."""
    return draw.choice(played_turns(draw, opponent))


def played_endgame(draw: random.Random, opponent: tuple[float, float]) -> str:
    """The position with one free cell of the first game ``played_turns`` plays that
    reaches it with X to move (about one game in six does)."""
    while (last := played_turns(draw, opponent)[-1]).count(EMPTY) != 1:
        pass
    return last


def played_turns(draw: random.Random, opponent: tuple[float, float]) -> list[str]:
    """X's turns of a game that X plays ``likeliest_win`` against an opponent who plays at
    random with a probability drawn uniformly in ``opponent``'s range and minimax-optimally
    otherwise; either player first, as in ``tictactoe``."""
    low, high = opponent
    random_move_prob = low + (high - low) * draw.random()  # 0-1: the draw itself, bit for bit
    board, x_to_move, turns = EMPTY_BOARD, draw.random() < 0.5, []
    while winner(board) is None:
        if x_to_move:
            turns.append(board)
            board = place(board, likeliest_win(board), "X")
        else:
            chance = draw.random() < random_move_prob
            moves = legal_moves(board) if chance else optimal_moves(board, "O")
            board = place(board, draw.choice(moves), "O")
        x_to_move = not x_to_move
    return turns


class TicTacToeMove(Environment[TicTacToeMoveConfig]):
    name = "tictactoe_move"
    version = "1.4.0"  # 1.1: positions; 1.2: win_chance; 1.3: endgame_share; 1.4: opponent range
    description = (
        "Single-turn tic-tac-toe: one position of a game in progress, X to move; the move "
        "is scored by the solved game (won, drawn or lost with perfect play after it)."
    )
    kind = "single_turn"
    isolation = "inline"  # pure, and linear in the action: see tictactoe's parse_move()
    Config = TicTacToeMoveConfig
    reward_weights = {
        "value": 1.0,
        "optimal": 0.5,
        "win_chance": 0.25,
        "format": 0.2,
        "invalid_move": 1.0,
    }
    """``win_chance`` weighs at most 0.25 so that it orders only moves ``value`` and
    ``optimal`` rank alike: among the solver's best moves, which all keep the game's
    value, the ones that leave an opponent playing at random most ways to go wrong."""

    def examples(self, config: TicTacToeMoveConfig, split: str) -> GeneratedExamples[str]:
        """``positions="marks"``: example ``i`` is a position with ``i mod 9`` marks, drawn
        uniformly among those: any nine consecutive examples span a game from the empty
        board to its last move, where uniform over the 4,520 positions would be three
        quarters late positions. ``"played"``: a turn of a strong player's game
        (``played_position``), for training a model on the positions its games meet,
        ``endgame_share`` of them the board's last free cell (``played_endgame``).
        The splits hold the same positions (a game has no more) in other draws."""
        groups = positions_by_marks()

        def make(index: int) -> str:
            draw = random.Random(stable_hash(self.name, split, config.seed, index))
            if config.positions == "played":
                if config.endgame_share and draw.random() < config.endgame_share:
                    return played_endgame(draw, config.opponent)
                return played_position(draw, config.opponent)
            return draw.choice(groups[index % len(groups)])

        return GeneratedExamples(config.split_size(split), make)

    def reset(self, config: TicTacToeMoveConfig, example: str, seed: int) -> Reset:
        board = example
        noughts = [cell for cell, mark in enumerate(board) if mark == "O"]
        model_starts = len(noughts) == board.count("X")
        if not noughts:
            news = "You play first."
        else:  # any O could have been the last move: none of them ended the game
            cell = random.Random(seed).choice(noughts)
            news = opponent_played(cell, first=not model_starts and len(noughts) == 1)
        state: State = {"board": board, "model_starts": model_starts, "move": None}
        return Reset(state, opening(news, board))

    def step(
        self, config: TicTacToeMoveConfig, state: State, action: Message, rng: TurnRandom
    ) -> Transition:
        content = action.get("content")
        move = parse_move(content)
        board = state["board"]
        valid = isinstance(move, int) and board[move] == EMPTY
        state = {**state, "move": move if valid else None, "formatted": formatted(content)}
        return Transition(state, [], True, invalid=not valid)

    def score(self, config: TicTacToeMoveConfig, state: State) -> Score:
        board, move = state["board"], state["move"]
        metrics: dict[str, Any] = {
            "marks": 9 - board.count(EMPTY),
            "position_value": position_value(board, "X"),
        }
        if "formatted" not in state:  # not answered yet
            components = dict.fromkeys(self.reward_weights, 0.0)
            return Score(components, {**metrics, "move_value": None, "invalid": None})
        if move is None:
            components = {
                "value": 0.0,
                "optimal": 0.0,
                "win_chance": 0.0,
                "format": float(state["formatted"]),
                "invalid_move": INVALID_MOVE_PENALTY,
            }
            return Score(components, {**metrics, "move_value": None, "invalid": True}, "invalid")
        value = move_value(board, move)
        components = {
            "value": VALUES[value],
            "optimal": 1.0 if move in optimal_moves(board, "X") else 0.0,
            "win_chance": float(win_chance(place(board, move, "X"), "O")),
            "format": float(state["formatted"]),
            "invalid_move": 0.0,
        }
        outcome = {1: "win", 0: "draw", -1: "loss"}[value]
        return Score(components, {**metrics, "move_value": value, "invalid": False}, outcome)

    def public_state(self, state: State) -> dict[str, Any]:
        return {key: state[key] for key in ("board", "model_starts", "move")}
