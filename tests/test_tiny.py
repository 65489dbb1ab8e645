"""The offline tiny model's tokenizer: what the GRPO and SFT paths rely on."""

from __future__ import annotations

import asyncio

from bench.tiny_tokenizer import train
from wander.client import Message
from wander.client.policies import MinimaxPolicy
from wander.trainer.tiny import TAGS, TOKENIZER_FILE, build_model, build_tokenizer


def test_the_shipped_tokenizer_is_what_the_games_train() -> None:
    """The file in the package is up to date with the environment's prompts, and training
    is deterministic (`python -m bench.tiny_tokenizer` writes it again)."""
    assert train().to_str(pretty=True) + "\n" == TOKENIZER_FILE.read_text()


def test_the_tokenizer_round_trips_answers_with_each_tag_one_token() -> None:
    tokenizer = build_tokenizer()
    board = " X | 1 | 2\n---+---+---\n 3 | O | 5\n---+---+---\n 6 | 7 | 8"
    prompt = [Message(role="user", content=board)]
    answer = asyncio.run(MinimaxPolicy(seed=0).act(prompt)).content
    assert answer is not None
    ids = tokenizer.encode(answer, add_special_tokens=False)
    assert tokenizer.decode(ids) == answer
    for tag in TAGS:
        assert tokenizer.convert_tokens_to_ids(tag) in ids
    # The baseline's reasons and the free cells it lists are words of the vocabulary,
    # not letters: an answer is a few dozen tokens, which is what bench.learning's
    # max_tokens_per_turn budgets for.
    assert len(ids) <= 36, [tokenizer.decode([i]) for i in ids]


def test_the_model_covers_every_token_the_tags_included() -> None:
    import torch

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    ids = tokenizer.encode("<think>x</think>\n<move>4</move>", add_special_tokens=False)
    assert max(ids) >= model.config.vocab_size - len(TAGS)  # the tags are the newest ids
    logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(tokenizer))
