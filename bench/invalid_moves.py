"""Where a tic-tac-toe model's invalid moves come from, and what its valid ones are worth:
each answer of its games checked against the conversation it answered.

    python -m bench.invalid_moves CHECKPOINT [--games 200] [--opponent random|optimal]
                                  [--latest-turn] [--greedy] [--results FILE]

Plays ``--games`` eval games of the saved model (``bench.learning --sft-checkpoint``, or
any tic-tac-toe model with its tokenizer) on a service of its own, exports them, and for
each answer asks: at which turn was it; did it name a cell that is not free (or none);
was that cell free at an earlier turn, or in the answer's own thought; did the thought
copy the latest "Available positions" list exactly; and a free cell's move, was it the
solver's likeliest win against a random opponent, another move that keeps the game's
value, or one that gives value away. Prints the table per turn and the counts, and
writes them as JSON (bench/README.md, "Where the SFT model's invalid moves come from").
``--latest-turn`` shows the model only the system prompt and each turn's
latest message (a model of ``bench.learning --task move``).

``--wins-on-board`` plays no games: it samples the model's answers on each position with
a win on the board that the teacher's games against a random opponent meet, and counts
how often it takes the win (bench/README.md, "Where GRPO's draws came from").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from bench.learning import OPPONENTS, embedded_service, exported
from wander.client import AsyncWanderClient, WanderClient
from wander.client.evaluation import evaluate
from wander.client.policies import LatestTurn
from wander.service.envs.tictactoe.env import parse_move
from wander.service.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    legal_moves,
    likeliest_win,
    optimal_moves,
    place,
    position_value,
    win_chance,
    winner,
)
from wander.service.envs.tictactoe.move import TicTacToeMove, TicTacToeMoveConfig, move_value
from wander.trainer.backends import Sampling, TransformersBackend
from wander.trainer.policy import BackendPolicy
from wander.trainer.rollout import render

_LISTED = re.compile(r"Available(?: positions)?:\s*([0-8](?:,\s*[0-8])*)")
_ROW = re.compile(r"^ ([XO0-8]) \| ([XO0-8]) \| ([XO0-8])$", re.MULTILINE)


def listed(text: str) -> list[int] | None:
    """The last list of free cells ``text`` holds (an observation's or a thought's)."""
    found = _LISTED.findall(text)
    return [int(cell) for cell in found[-1].split(",")] if found else None


def shown_board(text: str) -> str | None:
    """The last board ``text`` draws (the environment's ``render_board``), as a board
    string; None where it draws none."""
    rows = _ROW.findall(text)[-3:]
    if len(rows) < 3:
        return None
    return "".join(EMPTY if cell.isdigit() else cell for row in rows for cell in row)


def move_quality(board: str, cell: int) -> str:
    """What X's free ``cell`` on ``board`` is worth: ``likeliest win`` (an optimal move
    with the best chance against a random opponent, as the SFT teacher plays),
    ``value kept`` (optimal, a smaller chance) or ``value lost`` (worse than optimal:
    a won game let go to a draw, or a drawn one to a loss)."""
    if move_value(board, cell) < position_value(board, "X"):
        return "value lost"
    top = max(win_chance(place(board, m, "X"), "O") for m in optimal_moves(board, "X"))
    return "likeliest win" if win_chance(place(board, cell, "X"), "O") == top else "value kept"


def check_answers(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One record per assistant answer of a game: its turn (from 1), whether it named a
    free cell, where a cell it named that was not free came from, and what a free one's
    move is worth (``move_quality``)."""
    records = []
    earlier: set[int] = set()  # cells free at some earlier turn
    latest: list[int] | None = None
    board: str | None = None
    for message in messages:
        if message["role"] == "user":
            if latest is not None:
                earlier.update(latest)
            latest = listed(message["content"]) or latest
            board = shown_board(message["content"]) or board
            continue
        if message["role"] != "assistant" or latest is None:
            continue
        answer = message["content"]
        parsed = parse_move(answer)  # as the environment reads it
        move = parsed if isinstance(parsed, int) else None
        thought = listed(answer.split("<move>")[0])
        record: dict[str, Any] = {
            "turn": len(records) + 1,
            "free": move in latest,
            "copied": thought == latest,
        }
        if move is not None and move in latest and board is not None:
            record["move"] = move_quality(board, move)
            if record["move"] == "value lost":
                record["lost_on"] = f"{board} {move}"
        if move is not None and move not in latest:
            record["named"] = (
                "in its own thought" if thought and move in thought
                else "free earlier" if move in earlier
                else "never free"
            )  # fmt: skip
        records.append(record)
    return records


def summarise(games: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The counts over ``games``, each game's records as ``check_answers`` gives them."""
    records = [record for game in games for record in game]
    answers = Counter(r["turn"] for r in records)
    taken = Counter(r["turn"] for r in records if not r["free"])
    return {
        "games": len(games),
        "games_with_an_invalid_move": sum(any(not r["free"] for r in game) for game in games),
        "answers": len(records),
        "by_turn": {turn: [taken[turn], answers[turn]] for turn in sorted(answers)},
        "taken_cell_named": dict(Counter(r["named"] for r in records if "named" in r)),
        "no_move": sum(1 for r in records if not r["free"] and "named" not in r),
        "copied_latest_list": sum(r["copied"] for r in records),
        "free_cell_moves": dict(Counter(r["move"] for r in records if "move" in r)),
        "value_lost_on": dict(
            Counter(r["lost_on"] for r in records if "lost_on" in r).most_common(10)
        ),
    }


def report(summary: dict[str, Any]) -> str:
    turns = summary["by_turn"]
    return "\n".join([
        "| turn | " + " | ".join(str(turn) for turn in turns) + " |",
        "|---|" + "---|" * len(turns),
        "| answers naming a taken cell (or none) | "
        + " | ".join(f"{taken} of {of}" for taken, of in turns.values()) + " |",
        "",
        f"Games with an invalid move: {summary['games_with_an_invalid_move']} of "
        f"{summary['games']}.",
        f"Taken cells named: {summary['taken_cell_named']}; no move: {summary['no_move']}.",
        f"The thought copied the latest list exactly in {summary['copied_latest_list']} "
        f"of {summary['answers']} answers.",
        f"Free cells named: {summary['free_cell_moves']}.",
    ])  # fmt: skip


def load_checkpoint(checkpoint: Path) -> tuple[Any, Any]:
    """The saved model and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    return model, AutoTokenizer.from_pretrained(checkpoint)


def diagnose(
    url: str,
    checkpoint: Path,
    games: int,
    opponent: str,
    latest_turn: bool = False,
    greedy: bool = False,
) -> dict[str, Any]:
    """Plays ``games`` of the eval split: no more than it holds (the rest would be errors,
    and the counts over fewer games than asked for)."""
    with WanderClient(url) as wander:
        held = wander.environment("tictactoe").splits["eval"]
    if games > held:
        raise ValueError(f"{games} games asked for: the eval split holds {held}")
    model, tokenizer = load_checkpoint(checkpoint)
    backend = TransformersBackend(model, tokenizer, Sampling(48, 1.0, 1.0, 1 if greedy else 0))
    policy: Any = BackendPolicy(backend, tokenizer)
    if latest_turn:
        policy = LatestTurn(policy)
    run = f"diagnose-{opponent}"

    async def play() -> int:
        async with AsyncWanderClient(url) as wander:
            played = await evaluate(
                wander, "tictactoe", policy, examples=games, config=OPPONENTS[opponent],
                split="eval", run=run, concurrency=64,
            )  # fmt: skip
        return played.summary.episodes - played.summary.errors

    rows = exported(url, run, asyncio.run(play()), status="done")
    return summarise([check_answers(row["messages"]) for row in rows])


def wins_on_board(games: int = 5000, seed: int = 1) -> list[str]:
    """The distinct positions with a win on the board for X, X to move, that X meets
    playing the teacher's moves (``likeliest_win``) against an opponent playing at
    random, either first, over ``games`` games: where a model that learnt the teacher
    wins at once, and where a model that does not lets a won game go."""
    draw = random.Random(seed)
    met: dict[str, None] = {}  # in the order first met
    for _ in range(games):
        board, x_to_move = EMPTY_BOARD, draw.random() < 0.5
        while winner(board) is None:
            if x_to_move:
                if any(winner(place(board, m, "X")) == "X" for m in legal_moves(board)):
                    met[board] = None
                board = place(board, likeliest_win(board), "X")
            else:
                board = place(board, draw.choice(legal_moves(board)), "O")
            x_to_move = not x_to_move
    return list(met)


def wins_taken(model: Any, tokenizer: Any, boards: list[str], samples: int = 16) -> dict[str, Any]:
    """The shares of ``samples`` answers per board (sampled at temperature 1, as the
    learning benchmark evaluates) that take a win on the board, name another free cell,
    or are invalid; each board shown as ``tictactoe_move`` opens a turn, which is what a
    model of ``--task move`` sees of a game."""
    import torch

    torch.manual_seed(0)
    env, config = TicTacToeMove(), TicTacToeMoveConfig()
    backend = TransformersBackend(model, tokenizer, Sampling(48))
    answers: Counter[str] = Counter()
    for board in boards:
        prompt = render(tokenizer, env.reset(config, board, 0).messages, True)
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        for generation in backend.generate([ids] * samples):
            move = parse_move(tokenizer.decode(generation.token_ids, skip_special_tokens=True))
            if not isinstance(move, int) or board[move] != EMPTY:
                answers["invalid"] += 1
            elif winner(place(board, move, "X")) == "X":
                answers["win taken"] += 1
            else:
                answers["another free cell"] += 1
    total = sum(answers.values())
    shares = {kind: answers[kind] / total for kind in ("win taken", "another free cell", "invalid")}
    return {"positions": len(boards), "samples": samples, **shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="the model's and tokenizer's directory")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--opponent", choices=sorted(OPPONENTS), default="random")
    parser.add_argument(
        "--latest-turn", action="store_true",
        help="show the model each turn's latest message only (a model of --task move)",
    )  # fmt: skip
    parser.add_argument(
        "--greedy", action="store_true",
        help="answer with the likeliest token each time (top-k 1) instead of sampling at "
        "temperature 1 as the learning benchmark's evaluation does: are the invalid moves "
        "the model's belief, or draws from its tail?",
    )  # fmt: skip
    parser.add_argument(
        "--wins-on-board", action="store_true",
        help="play no games: sample 16 answers on each position with a win on the board "
        "that the teacher meets against a random opponent, and count the wins taken",
    )  # fmt: skip
    parser.add_argument("--results", type=Path, help="where the JSON goes")
    args = parser.parse_args()
    if args.wins_on_board:
        taken = wins_taken(*load_checkpoint(args.checkpoint), wins_on_board())
        print(
            f"On {taken['positions']} positions with a win on the board, {taken['samples']} "
            f"answers each: the win taken in {taken['win taken']:.1%}, another free cell "
            f"{taken['another free cell']:.1%}, invalid {taken['invalid']:.1%}."
        )
        if args.results:
            args.results.write_text(json.dumps(taken, indent=2) + "\n")
        return
    with embedded_service() as (url, _):
        try:
            summary = diagnose(
                url, args.checkpoint, args.games, args.opponent, args.latest_turn, args.greedy
            )
        except ValueError as exc:
            parser.error(str(exc))
    print(report(summary))
    if args.results:
        args.results.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
