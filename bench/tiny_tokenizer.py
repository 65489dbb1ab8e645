"""Train the tiny model's tokenizer from games, and write ``trainer/tiny_tokenizer.json``.

``python -m bench.tiny_tokenizer`` (a few seconds). The corpus is text like the
environments' transcripts: tic-tac-toe games played in the environment by the
baselines (the minimax player with its reasons, which is what warm-up data is
made of, the random player, and now and then a malformed answer, against
opponents of every strength), and some arithmetic. The trainer only loads the
result: it may not import the service, which the games need.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer

from wander.client.policies import MinimaxPolicy, RandomPolicy
from wander.sdk import TurnRandom
from wander.service.envs.tictactoe.env import TicTacToe, TicTacToeConfig
from wander.trainer.tiny import TAGS, untrained_tokenizer

SHIPPED = Path(__file__).resolve().parents[1] / "trainer" / "tiny_tokenizer.json"


def transcripts(games: int, seed: int) -> Iterator[str]:
    """Every message of ``games`` tic-tac-toe games played by the baselines."""
    env, config = TicTacToe(), TicTacToeConfig()
    rng = random.Random(seed)
    players = [MinimaxPolicy(noise=0.2, seed=seed), RandomPolicy(seed=seed)]
    for game in range(games):
        player = players[game % len(players)]
        state, messages = env.reset(config, {"random_move_prob": rng.random()}, seed + game)
        yield from (message["content"] for message in messages)
        done = False
        while not done:
            answer = player.answer(state["board"])
            if rng.random() < 0.05:
                answer = answer[: rng.randrange(len(answer))]
            yield answer
            state, replies, done, _ = env.step(
                config, state, {"role": "assistant", "content": answer}, TurnRandom(seed + game)
            )
            yield from (reply["content"] for reply in replies)


def corpus(games: int = 1000, seed: int = 0) -> Iterator[str]:
    """Tic-tac-toe transcripts, then some arithmetic."""
    yield from transcripts(games, seed)
    rng = random.Random(seed)
    for _ in range(games):
        yield f"What is {rng.randint(1, 99)} + {rng.randint(1, 99)}? Are you sure?"


def train(vocab_size: int = 1024) -> Tokenizer:
    """The tokenizer trained on ``corpus()``, the tags added as single tokens."""
    tokenizer, trainer = untrained_tokenizer(vocab_size)
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    tokenizer.add_tokens(TAGS)
    return tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=SHIPPED, help="where to write it")
    parser.add_argument("--vocab-size", type=int, default=1024)
    args = parser.parse_args()
    args.output.write_text(train(args.vocab_size).to_str(pretty=True) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
