"""``--model tiny``: a small decoder and a tokenizer built offline, for CPU runs and tests.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on games the
environment and its baselines play (prompts, boards, reasoned answers), with the
answer tags as single tokens and a ChatML chat template; the model is a freshly
initialised Llama-style decoder from a config. Hub ids (``Qwen/...``) load with
the usual ``from_pretrained`` instead.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] or '' }}<|im_end|>{% endgeneration %}\n"
    "{% else %}{{ message['content'] or '' }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML; the generation markers let SFT put the loss on the assistant's tokens only."""


TAGS = ["<think>", "</think>", "<move>", "</move>"]
"""The answer format's tags, one token each (as reasoning models have them): a tag
split into ``<``, ``think``, ``>`` is three chances for sampling to garble it."""


def _transcripts(games: int, seed: int) -> Iterator[str]:
    """Every message of ``games`` tic-tac-toe games played in the environment by the
    baselines: the minimax player with its reasons (what warm-up data is made of),
    the random player, and now and then a malformed answer, against opponents of
    every strength."""
    from wander.client.policies import MinimaxPolicy, RandomPolicy
    from wander.service.envs.seeding import TurnRandom
    from wander.service.envs.tictactoe.env import TicTacToe, TicTacToeConfig

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


def _corpus(games: int = 1000, seed: int = 0) -> Iterator[str]:
    """Text like the environments' transcripts: tic-tac-toe games, and some arithmetic."""
    yield from _transcripts(games, seed)
    rng = random.Random(seed)
    for _ in range(games):
        yield f"What is {rng.randint(1, 99)} + {rng.randint(1, 99)}? Are you sure?"


def build_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE (every text is encodable) with a ChatML template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.add_tokens(TAGS)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token=None,
        unk_token=None,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 4096,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A freshly initialised decoder sized for ``tokenizer``."""
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)
