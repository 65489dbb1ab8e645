"""Tic-tac-toe on its own (docs/environments.md#tictactoe): rules, opponent, rubric, seeds."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections import Counter
from typing import Any

import pytest

from tests.agents import Agent, answer, perfect_agent, random_agent
from wander.service.envs.seeding import TurnRandom, canonical_json, example_seed
from wander.service.envs.tictactoe import TicTacToe, TicTacToeConfig
from wander.service.envs.tictactoe.env import parse_move, render_board
from wander.service.envs.tictactoe.game import (
    EMPTY_BOARD,
    optimal_moves,
    position_value,
    winner,
)

ENV = TicTacToe()


def start(
    config: TicTacToeConfig, example: int, split: str = "train"
) -> tuple[dict[str, Any], int]:
    seed = example_seed(ENV.name, split, config.seed, example)
    state, _ = ENV.reset(config, ENV.examples(config, split)[example], seed)
    return state, seed


def play(config: TicTacToeConfig, example: int, agent: Agent) -> tuple[dict[str, Any], list[str]]:
    """One game; returns the final state and the boards the opponent answered (before, after)."""
    state, seed = start(config, example)
    boards = [state["board"]]
    done = False
    while not done:
        state, _, done, _ = ENV.step(
            config, state, {"role": "assistant", "content": agent(state["board"])}, TurnRandom(seed)
        )
        boards.append(state["board"])
    return state, boards


def opponent_moves(boards: list[str], model_starts: bool) -> list[tuple[str, int]]:
    """(board before, cell) for each move O made in a game's board sequence."""
    moves = []
    if not model_starts:
        moves.append((EMPTY_BOARD, boards[0].index("O")))
    for before, after in itertools.pairwise(boards):
        placed = [i for i in range(9) if before[i] != after[i]]
        o_cells = [i for i in placed if after[i] == "O"]
        if o_cells:
            x_cell = next(i for i in placed if after[i] == "X")
            moves.append((before[:x_cell] + "X" + before[x_cell + 1 :], o_cells[0]))
    return moves


OPTIMAL = TicTacToeConfig(min_random_move_prob=0.0, max_random_move_prob=0.0)
RANDOM = TicTacToeConfig(min_random_move_prob=1.0, max_random_move_prob=1.0)


def test_random_agent_never_beats_the_optimal_opponent() -> None:
    outcomes: Counter[str | None] = Counter()
    for example in range(400):
        state, boards = play(OPTIMAL, example, random_agent(example))
        outcomes[ENV.score(OPTIMAL, state).metrics["outcome"]] += 1
        for before, cell in opponent_moves(boards, state["model_starts"]):
            assert cell in optimal_moves(before, "O"), (before, cell)
    assert outcomes["win"] == 0
    assert outcomes["loss"] > 200  # the opponent does exploit a random player


def test_perfect_agent_draws_the_optimal_opponent_and_never_loses_to_a_random_one() -> None:
    for example in range(200):
        state, _ = play(OPTIMAL, example, perfect_agent)
        assert ENV.score(OPTIMAL, state).metrics["outcome"] == "draw"
    outcomes = Counter(
        ENV.score(RANDOM, play(RANDOM, example, perfect_agent)[0]).metrics["outcome"]
        for example in range(200)
    )
    assert outcomes["loss"] == 0
    assert outcomes["win"] > 150


def opponent_openings(config: TicTacToeConfig, examples: int) -> Counter[int]:
    """How often the opponent opened in each cell, over the games it started."""
    openings: Counter[int] = Counter()
    for example in range(examples):
        state, _ = start(config, example)
        if not state["model_starts"]:
            openings[state["board"].index("O")] += 1
    return openings


@pytest.mark.parametrize("config", [OPTIMAL, RANDOM], ids=["optimal", "random"])
def test_the_opening_spreads_over_all_nine_cells(config: TicTacToeConfig) -> None:
    openings = opponent_openings(config, 600)
    assert set(openings) == set(range(9))
    assert min(openings.values()) > openings.total() / 9 / 2  # roughly uniform


def test_reply_to_a_centre_opening_spreads_over_the_four_corners() -> None:
    replies: Counter[int] = Counter()
    for example in range(400):
        state, seed = start(OPTIMAL, example)
        if state["model_starts"]:
            state, *_ = ENV.step(OPTIMAL, state, {"content": answer(4)}, TurnRandom(seed))
            replies[state["board"].index("O")] += 1
    assert set(replies) == {0, 2, 6, 8}
    assert min(replies.values()) > replies.total() / 4 / 2


def test_stratification_puts_example_i_in_its_stratum() -> None:
    config = TicTacToeConfig(min_random_move_prob=0.2, max_random_move_prob=0.7, num_groups=5)
    examples = ENV.examples(config, "train")
    for i in range(1000):
        low = 0.2 + 0.1 * (i % 5)
        assert low <= examples[i]["random_move_prob"] <= low + 0.1 + 1e-12, i
    # Within a stratum the draws differ, and the eval split has its own draws.
    assert len({examples[i]["random_move_prob"] for i in range(0, 100, 5)}) == 20
    assert ENV.examples(config, "eval")[0] != examples[0]


def test_overriding_the_seed_keeps_the_examples_difficulty() -> None:
    example = ENV.examples(TicTacToeConfig(), "train")[7]
    states = [ENV.reset(TicTacToeConfig(), example, seed).state for seed in range(20)]
    assert {s["random_move_prob"] for s in states} == {example["random_move_prob"]}
    assert {s["model_starts"] for s in states} == {True, False}


def test_same_inputs_give_identical_transcripts() -> None:
    config = TicTacToeConfig(min_random_move_prob=0.3, max_random_move_prob=0.6)

    def transcript() -> list[Any]:
        state, seed = start(config, 11)
        out: list[Any] = [ENV.reset(config, ENV.examples(config, "train")[11], seed)]
        agent = random_agent(5)
        done = False
        while not done:
            action = {"role": "assistant", "content": agent(state["board"])}
            state, messages, done, _ = ENV.step(config, state, action, TurnRandom(seed))
            out.append((messages, done))
        out.append(ENV.score(config, state))
        return out

    assert transcript() == transcript()


def test_same_position_by_different_paths_gets_the_same_reply() -> None:
    config = TicTacToeConfig(min_random_move_prob=0.5, max_random_move_prob=0.5)
    seed = 123
    base = {
        "board": "O.X......",
        "model_starts": False,
        "random_move_prob": 0.5,
        "max_turns": 8,
        "turns": 1,
        "invalid_moves": 0,
        "formatted": 1,
        "winner": None,
    }
    via_4 = ENV.step(config, base, {"content": answer(4)}, TurnRandom(seed))
    other = {**base, "board": "O...X...."}
    via_2 = ENV.step(config, other, {"content": answer(2)}, TurnRandom(seed))
    assert via_4.state["board"] == via_2.state["board"]
    assert via_4.messages == via_2.messages


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<think>a</think><move>4</move>", 4),
        ("<move> 7 </move>", 7),
        ("<think><move>1</move></think><move>2</move>", 2),
        ("<move>1</move> then <move>3</move>", 3),
        ("I play 4", "no <move>N</move> tag found"),
        ("<move>9</move>", "'9' is not a cell number from 0 to 8"),
        ("<move>-1</move>", "'-1' is not a cell number from 0 to 8"),
        ("<move>four</move>", "'four' is not a cell number from 0 to 8"),
        ("<move>٣</move>", "'٣' is not a cell number from 0 to 8"),
        (None, "no <move>N</move> tag found"),
    ],
)
def test_parse_move(content: str | None, expected: int | str) -> None:
    assert parse_move(content) == expected


def test_board_rendering_numbers_the_empty_cells() -> None:
    assert render_board("X...O....") == (
        " X | 1 | 2\n---+---+---\n 3 | O | 5\n---+---+---\n 6 | 7 | 8"
    )


def model_first_example(config: TicTacToeConfig) -> tuple[dict[str, Any], int]:
    example = next(i for i in range(100) if start(config, i)[0]["model_starts"])
    return start(config, example)


def test_invalid_moves_are_explained_penalised_and_the_game_goes_on() -> None:
    state, seed = model_first_example(OPTIMAL)
    state, messages, done, invalid = ENV.step(
        OPTIMAL, state, {"content": answer(4)}, TurnRandom(seed)
    )
    assert not invalid
    taken = state["board"].index("O")
    for content, reason in [
        ("4", "no <move>N</move> tag found"),
        (answer(12), "'12' is not a cell number from 0 to 8"),
        (answer(taken), f"cell {taken} is already taken"),
    ]:
        board = state["board"]
        state, messages, done, invalid = ENV.step(
            OPTIMAL, state, {"content": content}, TurnRandom(seed)
        )
        assert invalid and not done
        assert state["board"] == board
        assert messages[0]["content"].startswith(f"Invalid move: {reason}.")
        assert render_board(board) in messages[0]["content"]
        assert messages[0]["content"].endswith("Your turn.")
    score = ENV.score(OPTIMAL, state)
    assert score.components == {"win": 0.0, "format": 3 / 4, "invalid_move": -0.1}
    assert score.metrics["invalid_moves"] == 3
    assert score.metrics["turns"] == 4
    assert score.outcome is None  # still being played


def test_reaching_max_turns_without_a_result_is_a_loss() -> None:
    config = TicTacToeConfig(max_turns=3)
    state, seed = start(config, 0)
    for _ in range(3):
        state, messages, done, _ = ENV.step(config, state, {"content": "pass"}, TurnRandom(seed))
    assert done
    assert "limit of 3 turns" in messages[0]["content"]
    score = ENV.score(config, state)
    assert score.metrics["outcome"] == score.outcome == "loss"
    assert score.components == {"win": 0.0, "format": 0.0, "invalid_move": -0.1}
    assert ENV.total(score.components) == pytest.approx(-0.1)


def test_a_won_game_scores_exactly() -> None:
    config = RANDOM
    for example in range(50):
        state, _ = play(config, example, perfect_agent)
        if state["winner"] == "X":
            break
    score = ENV.score(config, state)
    assert score.components == {"win": 1.0, "format": 1.0, "invalid_move": 0.0}
    assert ENV.total(score.components) == 1.2
    assert score.metrics["outcome"] == "win"


@pytest.mark.parametrize(
    ("thought", "credit"),
    [("The centre is free.", 1.0), ("", 0.0), ("  \n ", 0.0), ("<move>4</move>", 1.0)],
)
def test_only_a_thought_earns_format_credit(thought: str, credit: float) -> None:
    """An empty or blank ``<think>`` is no reasoning: a model that learned to send one
    would be paid for thinking nothing."""
    state, seed = model_first_example(OPTIMAL)
    action = {"content": f"<think>{thought}</think><move>4</move>"}
    state, *_ = ENV.step(OPTIMAL, state, action, TurnRandom(seed))
    assert ENV.score(OPTIMAL, state).components["format"] == credit
    assert state["board"][4] == "X"  # the move counts either way


def test_running_score_has_no_outcome_until_the_end() -> None:
    state, seed = model_first_example(OPTIMAL)
    state, *_ = ENV.step(OPTIMAL, state, {"content": "<move>4</move>"}, TurnRandom(seed))
    score = ENV.score(OPTIMAL, state)
    assert score.components == {"win": 0.0, "format": 0.0, "invalid_move": 0.0}
    assert score.metrics["outcome"] is None


def test_public_state_has_the_documented_fields() -> None:
    state, _ = start(TicTacToeConfig(), 0)
    public = ENV.public_state(state)
    assert set(public) == {
        "board", "winner", "model_starts", "random_move_prob", "invalid_moves", "max_turns",
    }  # fmt: skip
    assert len(public["board"]) == 9 and set(public["board"]) <= {"X", "O", "."}


def test_solver_knows_the_game() -> None:
    assert position_value(EMPTY_BOARD, "X") == 0
    assert optimal_moves("....X....", "O") == (0, 2, 6, 8)
    assert optimal_moves("XX..O....", "O") == (2,)  # block
    assert optimal_moves("XX.OO....", "O") == (5,)  # win beats blocking
    assert (
        winner("XXXOO....") == "X" and winner("XOXXOOOXX") == "draw" and winner(".........") is None
    )


GOLDEN_CONFIGS = {
    "random": RANDOM,
    "optimal": OPTIMAL,
    "mixed": TicTacToeConfig(min_random_move_prob=0.2, max_random_move_prob=0.8, num_groups=3),
    "short": TicTacToeConfig(min_random_move_prob=0.5, max_random_move_prob=0.5, max_turns=3),
}
GOLDEN_DIGEST = "a1f3c6c8e404456ca45a6ad3bf0d3155"


def golden_transcript(config: TicTacToeConfig, example: int) -> list[Any]:
    """Every output of one seeded game, with an agent that mixes legal, perfect,
    occupied, out-of-range and untagged moves."""
    seed = example_seed(ENV.name, "train", config.seed, example)
    reset = ENV.reset(config, ENV.examples(config, "train")[example], seed)
    out: list[Any] = [reset]
    state, done, rng = reset.state, False, random.Random(example)
    while not done:
        legal = [i for i, mark in enumerate(state["board"]) if mark == "."]
        content = rng.choice(
            [
                answer(rng.choice(legal)),
                answer(rng.choice(legal)),
                perfect_agent(state["board"]),
                answer(rng.choice([i for i in range(9) if i not in legal] or [9])),
                answer(rng.randrange(-2, 12)),
                f"I play {rng.choice(legal)}",
                None,
            ]
        )
        step = ENV.step(config, state, {"role": "assistant", "content": content}, TurnRandom(seed))
        score = ENV.score(config, step.state)
        out.append([step, score, ENV.total(score.components), ENV.public_state(step.state)])
        state, done = step.state, step.done
    return out


def test_seeded_games_are_byte_identical_to_the_recorded_ones() -> None:
    """A digest of every reset, step, score and public state of 400 seeded games, recorded
    before the game tree was precomputed: any change in a message, a state, a reward or
    an opponent's draw changes it (docs/architecture.md#seeds-and-determinism,
    docs/environments.md#tictactoe)."""
    digest = hashlib.blake2b(digest_size=16)
    seen: Counter[Any] = Counter()
    for name, config in GOLDEN_CONFIGS.items():
        for example in range(100):
            transcript = golden_transcript(config, example)
            seen[transcript[0].state["model_starts"]] += 1
            seen[transcript[-1][1].outcome, transcript[-1][0].state["winner"]] += 1
            digest.update(canonical_json([name, example, transcript]))
    assert seen[True] > 100 and seen[False] > 100  # both starters
    for ending in [("win", "X"), ("loss", "O"), ("draw", "draw"), ("loss", None)]:
        assert seen[ending] > 10, seen  # a loss with no winner: the turn limit
    assert digest.hexdigest() == GOLDEN_DIGEST
