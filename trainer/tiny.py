"""``--model tiny``: a small decoder and a tokenizer built offline, for CPU runs and tests.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on games the
environment and its baselines play (prompts, boards, reasoned answers), with the
answer tags as single tokens and a ChatML chat template, shipped as
``tiny_tokenizer.json`` (the trainer never imports the service, so the games are
played by ``bench.tiny_tokenizer``, which wrote the file); the model is a freshly
initialised Llama-style decoder from a config. Hub ids (``Qwen/...``) load with
the usual ``from_pretrained`` instead.
"""

from __future__ import annotations

from importlib.resources import files

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

TOKENIZER_FILE = files("wander.trainer") / "tiny_tokenizer.json"
"""The trained tokenizer, shipped with the package; ``python -m bench.tiny_tokenizer``
trains it again from games the environment and its baselines play."""


def untrained_tokenizer(vocab_size: int) -> tuple[Tokenizer, trainers.BpeTrainer]:
    """A byte-level BPE (every text is encodable) and the trainer that fills it."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tokenizer, trainer


def build_tokenizer(*, tools: bool = False) -> PreTrainedTokenizerFast:
    """The shipped tokenizer with its chat template, ready for ``transformers``.

    ``tools``: TRL's copy of Qwen3's template instead, for TRL's tool loop
    (``environment_factory``). TRL parses tool calls only out of chat templates it
    knows, compared character for character, and the plain ChatML one renders no
    tools; Qwen3's is ChatML with tools, on the same special tokens.
    """
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(TOKENIZER_FILE.read_text()),
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token=None,
        unk_token=None,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    if tools:
        from trl.chat_template_utils import qwen3_chat_template

        wrapped.chat_template = qwen3_chat_template
    return wrapped


HEAD_SIZE = 32
"""The smallest head size vLLM's CPU attention kernel serves (it refuses 16)."""


def build_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A freshly initialised decoder sized for ``tokenizer``, with heads of
    ``HEAD_SIZE`` unless ``heads`` says how many: vLLM's CPU attention kernel serves
    head sizes of 32 and up, and the tests serve this model on it."""
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads or hidden_size // HEAD_SIZE,
        num_key_value_heads=heads or hidden_size // HEAD_SIZE,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)
