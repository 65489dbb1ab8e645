"""`python -m bench.invalid_moves`: each answer of a game checked against the conversation
the environment really sent (bench/README.md's table of where invalid moves come from)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.invalid_moves import (
    check_answers,
    diagnose,
    listed,
    move_quality,
    report,
    summarise,
    wins_on_board,
    wins_taken,
)
from wander.service.envs.seeding import TurnRandom
from wander.service.envs.tictactoe import TicTacToe, TicTacToeConfig
from wander.service.envs.tictactoe.game import EMPTY_BOARD, legal_moves, place, winner
from wander.testing import ServiceProcess

Answer = Callable[[list[int], list[int]], str]
"""An answer from the latest list of free cells and the first list of the game."""


FIRST_SEAT, SECOND_SEAT = 3, 0
"""Seeds of games where the model plays first, and where the opponent does."""


def play(answers: list[Answer], seed: int = FIRST_SEAT) -> list[dict[str, str]]:
    """A real game of the environment against its random opponent, the model's answers
    written from what it was shown."""
    env, config = TicTacToe(), TicTacToeConfig()
    state, messages = env.reset(config, {"random_move_prob": 1.0}, seed)
    first = listed(messages[-1]["content"])
    assert first is not None
    for answer in answers:
        content = answer(listed(messages[-1]["content"]) or [], first)
        state, replies, done = env.step(config, state, {"role": "assistant", "content": content},
                                        TurnRandom(seed))[:3]  # fmt: skip
        messages += [{"role": "assistant", "content": content}, *replies]
        assert not done
    return messages


def copied(cells: list[int]) -> str:
    return f"<think>Available: {', '.join(map(str, cells))}.</think>"


def test_each_answer_is_checked_against_the_position_it_answered() -> None:
    messages = play([
        lambda latest, first: copied(latest) + "<move>4</move>",  # free; the list copied
        # The opponent's cell: free at the first turn, taken now.
        lambda latest, first: copied(latest) + f"<move>{min(set(first) - {4, *latest})}</move>",
        lambda latest, first: copied([4, *latest]) + "<move>4</move>",  # its own thought's
        lambda latest, first: "<think>No idea.</think>",  # no move at all
        lambda latest, first: copied(latest) + f"<move>{latest[0]}</move>",
    ])  # fmt: skip
    assert "You play first." in messages[1]["content"]
    records = check_answers(messages)

    assert [(r["turn"], r["free"], r["copied"]) for r in records] == [
        (1, True, True), (2, False, True), (3, False, False), (4, False, False), (5, True, True),
    ]  # fmt: skip
    assert [r.get("named") for r in records] == [
        None, "free earlier", "in its own thought", None, None,
    ]  # fmt: skip
    # The free cells' moves are rated on the board each answer was shown: the centre of
    # the empty board keeps the draw, but a corner is likelier to win.
    assert [("move" in r) for r in records] == [r["free"] for r in records]
    assert records[0]["move"] == "value kept"
    summary = summarise([records, check_answers(messages[:4])])  # and a game cut at turn 1
    assert summary["games"] == 2 and summary["games_with_an_invalid_move"] == 1
    assert summary["by_turn"] == {1: [0, 2], 2: [1, 1], 3: [1, 1], 4: [1, 1], 5: [0, 1]}
    assert summary["taken_cell_named"] == {"free earlier": 1, "in its own thought": 1}
    assert summary["no_move"] == 1 and summary["copied_latest_list"] == 4
    assert sum(summary["free_cell_moves"].values()) == 3
    assert "| answers naming a taken cell (or none) | 0 of 2 | 1 of 1 | 1 of 1 |" in report(summary)
    assert "Games with an invalid move: 1 of 2." in report(summary)


def test_a_cell_never_free_and_a_move_that_is_no_cell_are_told_apart() -> None:
    """The opponent's first cell, taken before the model's first turn; and a number the
    environment reads as no cell at all."""
    records = check_answers(play([
        lambda latest, first: copied(latest) + f"<move>{min(set(range(9)) - set(latest))}</move>",
        lambda latest, first: copied(latest) + "<move>9</move>",
    ], seed=SECOND_SEAT))  # fmt: skip
    assert records == [
        {"turn": 1, "free": False, "copied": True, "named": "never free"},
        {"turn": 2, "free": False, "copied": True},
    ]
    assert summarise([records])["no_move"] == 1


def test_a_free_cells_move_is_rated_by_the_solved_game() -> None:
    """Two in a row: the third cell wins, any other lets the opponent's two win. On the
    empty board every cell draws with perfect play, a corner likeliest to win against a
    random opponent."""
    assert move_quality("XX.OO....", 2) == "likeliest win"
    assert move_quality("XX.OO....", 8) == "value lost"
    assert move_quality(EMPTY_BOARD, 0) == "likeliest win"
    assert move_quality(EMPTY_BOARD, 4) == "value kept"


def test_the_positions_with_a_win_on_the_board_are_the_teachers_against_random() -> None:
    boards = wins_on_board(games=500)
    assert boards == wins_on_board(games=500) and len(set(boards)) == len(boards) > 20
    for board in boards:
        assert winner(board) is None and board.count("X") <= board.count("O")  # X to move
        assert any(winner(place(board, m, "X")) == "X" for m in legal_moves(board))
    assert set(boards) < set(wins_on_board(games=5000))


def test_an_untrained_model_takes_no_win_on_the_board() -> None:
    from wander.trainer.tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    boards = wins_on_board(games=50)[:3]
    taken = wins_taken(build_model(tokenizer), tokenizer, boards, samples=2)
    assert taken == {"positions": 3, "samples": 2, "win taken": 0.0,
                     "another free cell": 0.0, "invalid": 1.0}  # fmt: skip


def test_a_diagnosis_plays_no_more_games_than_the_eval_split_holds(
    live: ServiceProcess, tmp_path: Path
) -> None:
    """Asked for more, it says so before loading a model, rather than count the games it
    could play as if they were all."""
    with pytest.raises(ValueError, match="1001 games asked for: the eval split holds 1000"):
        diagnose(live.url, tmp_path / "no-model", 1001, "optimal")
