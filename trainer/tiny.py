"""``--model tiny``: a small decoder and a tokenizer built offline, for CPU runs and tests.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on text the
environments themselves produce (prompts, boards, answers), with a ChatML chat
template; the model is a freshly initialised Llama-style decoder from a config.
Hub ids (``Qwen/...``) load with the usual ``from_pretrained`` instead.
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


def _corpus(lines: int = 4000, seed: int = 0) -> Iterator[str]:
    """Text like the environments' transcripts: boards, moves, reasoning, arithmetic."""
    from service.envs.tictactoe.env import SYSTEM_PROMPT, render_board

    rng = random.Random(seed)
    yield SYSTEM_PROMPT
    for _ in range(lines):
        board = "".join(rng.choice("XO.") for _ in range(9))
        free = [str(i) for i, mark in enumerate(board) if mark == "."] or ["4"]
        yield render_board(board)
        yield f"Available positions: {', '.join(free)}\nYour turn."
        yield f"<think>I take {rng.choice(free)}.</think>\n<move>{rng.choice(free)}</move>"
        yield f"The opponent (O) played {rng.randint(0, 8)}. Invalid move: cell 4 is taken."
        sums = f"What is {rng.randint(1, 99)} + {rng.randint(1, 99)}?"
        yield f"Game over. You win! It's a draw. {sums}"


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
