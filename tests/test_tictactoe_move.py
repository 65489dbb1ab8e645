"""``tictactoe_move`` (docs/environments.md#tictactoe_move): one move, scored by the solved
game, in the very message a whole game of ``tictactoe`` shows at that position."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tests.agents import answer, random_agent
from wander.client import Message
from wander.client.policies import MinimaxPolicy
from wander.client.policies.tictactoe import likeliest_win as clients_likeliest_win
from wander.service.envs.seeding import TurnRandom, example_seed
from wander.service.envs.tictactoe import (
    TicTacToe,
    TicTacToeConfig,
    TicTacToeMove,
    TicTacToeMoveConfig,
)
from wander.service.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    legal_moves,
    likeliest_win,
    optimal_moves,
    place,
    positions,
    winner,
)

ENV = TicTacToeMove()
CONFIG = TicTacToeMoveConfig()


def reset(board: str, seed: int = 0) -> Any:
    return ENV.reset(CONFIG, board, seed)


def scored(board: str, content: str | None) -> tuple[dict[str, float], Any]:
    """The components and the score of answering ``content`` on ``board``."""
    action = {"role": "assistant", "content": content}
    step = ENV.step(CONFIG, reset(board).state, action, TurnRandom(0))
    assert step.done and step.messages == []
    score = ENV.score(CONFIG, step.state)
    return score.components, score


@pytest.mark.parametrize(
    ("board", "cell", "value", "optimal", "outcome"),
    [
        ("XX.OO....", 2, 1.0, 1.0, "win"),  # completes the top row
        ("XX.OO....", 5, 0.5, 0.0, "draw"),  # blocks instead: O blocks too, and it is drawn
        ("XX.OO....", 8, 0.0, 0.0, "loss"),  # O then completes the middle row
        ("XOOX.....", 6, 1.0, 1.0, "win"),  # completes the left column
        ("XOOX.....", 4, 1.0, 0.0, "win"),  # a fork that wins later: not the quickest
        ("....O....", 0, 0.5, 1.0, "draw"),  # a corner against the centre: the draw holds
        ("....O....", 1, 0.0, 0.0, "loss"),  # an edge against the centre loses to perfect play
        ("O...X...O", 1, 0.5, 1.0, "draw"),  # an edge against two opposite corners
        ("O...X...O", 2, 0.0, 0.0, "loss"),  # a corner there lets O fork
    ],
)
def test_a_move_scores_what_the_solved_game_says(
    board: str, cell: int, value: float, optimal: float, outcome: str
) -> None:
    components, score = scored(board, answer(cell))
    solved = {"value": value, "optimal": optimal, "format": 1.0, "invalid_move": 0.0}
    assert {name: components[name] for name in solved} == solved
    assert score.outcome == outcome and score.metrics["invalid"] is False
    assert (components["win_chance"] == 1.0) == (value == 1.0)  # sure against any O


def test_win_chance_ranks_the_solvers_equal_moves_by_what_they_win_against_random() -> None:
    """Against the centre every corner keeps the draw; the exact chance X then wins
    against an opponent playing at random (X playing on for wins) is 26/35 after any
    of them, and an edge, which loses to perfect play, scores below all of them however
    often it would win."""
    board = "....O...."
    corners = [scored(board, answer(cell))[0] for cell in (0, 2, 6, 8)]
    assert all(c["win_chance"] == pytest.approx(26 / 35) for c in corners)
    edge = scored(board, answer(1))[0]
    assert 0 < edge["win_chance"] < corners[0]["win_chance"]
    assert ENV.total(edge) < min(ENV.total(c) for c in corners)


def test_the_reward_ranks_the_strong_players_move_first_on_every_position() -> None:
    """Every one of the 4,520 positions: each of the solver's best moves outscores every
    other legal move, and the move ``likeliest_win`` plays (the warm-up teacher's, and
    what wins 96% against random) scores the most, so GRPO pulls a model that copied
    any of the best moves toward the ones that win."""
    for board in positions("X"):
        totals = {cell: ENV.total(scored(board, answer(cell))[0]) for cell in legal_moves(board)}
        best = optimal_moves(board, "X")
        assert min(totals[c] for c in best) > max(
            (totals[c] for c in totals if c not in best), default=-1.0
        ), board
        assert totals[likeliest_win(board)] == max(totals.values()), board


@pytest.mark.parametrize(
    ("content", "formatted"),
    [(answer(4), True), (answer("x"), True), ("<move>4</move>", False), (None, False)],
)
def test_an_invalid_move_scores_below_every_legal_one(content: str | None, formatted: bool) -> None:
    board = "....O...."  # cell 4 is taken
    components, score = scored(board, content)
    assert components == {
        "value": 0.0, "optimal": 0.0, "win_chance": 0.0, "format": float(formatted),
        "invalid_move": -0.1,
    }  # fmt: skip
    assert score.outcome == "invalid" and score.metrics["invalid"] is True
    worst_legal = min(ENV.total(scored(board, answer(c))[0]) for c in range(9) if c != 4)
    assert ENV.total(components) < worst_legal


def test_the_minimax_baseline_scores_the_most_on_every_position() -> None:
    """Every one of the 4,520 positions: the client's baseline (its own solver) plays a
    move worth the position's value and one of the quickest wins or slowest losses."""
    baseline = MinimaxPolicy(seed=0)
    for board in positions("X"):
        components, score = scored(board, baseline.answer(board))
        assert components["optimal"] == 1.0, board
        assert score.outcome == {1: "win", 0: "draw", -1: "loss"}[score.metrics["position_value"]]


def test_the_prompt_is_what_a_whole_game_shows_at_that_position() -> None:
    """Over whole games of ``tictactoe``, each message that asks for a move is one of those
    the same position gets here (the news of the opponent's last move is drawn)."""
    game, config = TicTacToe(), TicTacToeConfig()
    asked = 0
    for example in range(60):
        seed = example_seed(game.name, "train", 0, example)
        state, messages = game.reset(config, game.examples(config, "train")[example], seed)
        agent, done = random_agent(example), False
        while not done:
            board = state["board"]
            here = {tuple(m["content"] for m in reset(board, s).messages) for s in range(30)}
            assert (messages[0]["content"], messages[-1]["content"]) in here, board
            asked += 1
            action = {"role": "assistant", "content": agent(board)}
            step = game.step(config, state, action, TurnRandom(seed))
            state, done, messages = step.state, step.done, [messages[0], *step.messages]
    assert asked > 200


def test_example_i_has_i_mod_9_marks_and_repeats() -> None:
    for split in ("train", "eval"):
        examples = ENV.examples(CONFIG, split)
        drawn = [examples[i] for i in range(900)]
        assert drawn == [examples[i] for i in range(900)]
        for i, board in enumerate(drawn):
            assert 9 - board.count(EMPTY) == i % 9 and winner(board) is None
            assert board.count("X") in (board.count("O"), board.count("O") - 1)  # X to move
        assert len(set(drawn)) > 500
    assert ENV.examples(CONFIG, "train")[9:900] != ENV.examples(CONFIG, "eval")[9:900]
    reseeded = ENV.examples(TicTacToeMoveConfig(seed=1), "train")
    assert reseeded[9:900] != ENV.examples(CONFIG, "train")[9:900]


def strong_players_positions(
    opponent_moves: Callable[[str], Iterable[int]] = legal_moves,
) -> set[str]:
    """Every position X meets playing ``likeliest_win`` against an opponent who may play
    ``opponent_moves`` (any move, by default)."""
    met: set[str] = set()

    def visit(board: str, x_to_move: bool) -> None:
        if winner(board) is not None:
            return
        if x_to_move:
            met.add(board)
            visit(place(board, likeliest_win(board), "X"), False)
        else:
            for cell in opponent_moves(board):
                visit(place(board, cell, "O"), True)

    visit(EMPTY_BOARD, True)
    visit(EMPTY_BOARD, False)
    return met


def test_played_positions_are_a_strong_players_turns_as_often_as_games_meet_them() -> None:
    for board in positions("X"):  # the service's and the client's solvers play alike
        assert likeliest_win(board) == clients_likeliest_win(board) in optimal_moves(board, "X")
    config = TicTacToeMoveConfig(positions="played")
    drawn = [ENV.examples(config, "train")[i] for i in range(2000)]
    assert drawn == [ENV.examples(config, "train")[i] for i in range(2000)]
    assert set(drawn) <= strong_players_positions() and len(strong_players_positions()) == 383
    assert len(set(drawn)) > 250
    marks = Counter(9 - board.count(EMPTY) for board in drawn)
    assert marks[0] > marks[8] * 3  # every game has a first turn; few have a ninth mark
    assert ENV.examples(config, "eval")[:50] != drawn[:50]


def test_played_positions_against_an_optimal_opponent_are_its_games_turns_only() -> None:
    optimal = TicTacToeMoveConfig(positions="played", max_random_move_prob=0.0)
    drawn = [ENV.examples(optimal, "train")[i] for i in range(500)]
    met = strong_players_positions(lambda board: optimal_moves(board, "O"))
    assert set(drawn) <= met and len(set(drawn)) > len(met) // 2
    assert len(met) < 200 < len(strong_players_positions())
    # the default range, 0-1, draws the positions that tictactoe_move 1.3 drew, bit for bit
    before = ["..OOXX..O", "X.XO....O", ".........", "XXOOO.X..", "O...X...O", ".X.OX.O.O"]
    default = TicTacToeMoveConfig(positions="played")
    assert [ENV.examples(default, "train")[i] for i in range(6)] == before
    with pytest.raises(ValueError, match="positions='played' only"):
        TicTacToeMoveConfig(max_random_move_prob=0.25)
    with pytest.raises(ValueError, match="must not exceed"):
        TicTacToeMoveConfig(positions="played", min_random_move_prob=0.5, max_random_move_prob=0.2)


def test_endgame_share_makes_that_share_of_played_positions_the_last_free_cell() -> None:
    config = TicTacToeMoveConfig(positions="played", endgame_share=0.5)
    drawn = [ENV.examples(config, "train")[i] for i in range(2000)]
    assert drawn == [ENV.examples(config, "train")[i] for i in range(2000)]
    assert set(drawn) <= strong_players_positions()
    last_cells = sum(board.count(EMPTY) == 1 for board in drawn) / len(drawn)
    assert 0.48 < last_cells < 0.56  # half drawn as endgames, 3% of the other half
    with pytest.raises(ValueError, match="positions='played' only"):
        TicTacToeMoveConfig(positions="marks", endgame_share=0.2)


def test_news_names_an_o_and_who_started() -> None:
    assert reset(EMPTY * 9).messages[1]["content"].startswith("You play first.\n")
    assert (
        reset("...O.....")
        .messages[1]["content"]
        .startswith("The opponent (O) played first, in cell 3.\n")
    )
    news = Counter(reset("X...O...O", s).messages[1]["content"].split("\n")[0] for s in range(40))
    assert set(news) == {"The opponent (O) played 4.", "The opponent (O) played 8."}
    assert reset("X...O....").state["model_starts"] is True
    assert reset("X..OO....").state["model_starts"] is False


async def test_the_baselines_read_the_position_from_its_message() -> None:
    """The client's baselines play here as in ``tictactoe``: from the message alone."""
    assert "tictactoe_move" in MinimaxPolicy.plays
    for board in random.Random(0).sample(positions("X"), 50):
        messages = [Message(**m) for m in reset(board).messages]
        reply = await MinimaxPolicy(seed=1).act(messages)
        assert scored(board, reply.content)[0]["optimal"] == 1.0, board
