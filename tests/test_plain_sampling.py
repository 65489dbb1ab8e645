"""The transformers backend samples from the policy GRPO trains, whatever the
checkpoint's generation config says, and stops where TRL stops."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from wander.trainer.backends import Sampling, TransformersBackend
from wander.trainer.tiny import build_model, build_tokenizer

PROMPTS = [
    "<|im_start|>user\nYour move:\nX . O\n. . .\n. . .<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
]


def lora(model: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=4, target_modules="all-linear"))


@pytest.mark.parametrize("wrap", [None, lora], ids=["model", "peft"])
def test_sampling_is_plain_temperature_whatever_the_checkpoint_says(wrap: Any) -> None:
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    # A checkpoint's own sampling defaults; each would change what is sampled.
    model.generation_config.update(repetition_penalty=5.0, no_repeat_ngram_size=1, top_k=3)
    policy = model if wrap is None else wrap(model)
    returned: list[Any] = []
    generate = policy.generate
    policy.generate = lambda **kwargs: returned.append(generate(**kwargs)) or returned[-1]
    backend = TransformersBackend(policy, tokenizer, Sampling(max_new_tokens=24, temperature=0.7))
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]

    torch.manual_seed(0)
    generations = backend.generate(prompts)

    repeated = False
    for prompt, generation in zip(prompts, generations, strict=True):
        sequence = prompt + generation.token_ids
        with torch.no_grad():
            logits = policy(input_ids=torch.tensor([sequence])).logits[0, len(prompt) - 1 : -1]
        # Each token's logprob is the one TRL's loss computes: log_softmax(logits / T).
        expected = (logits / 0.7).log_softmax(-1)
        expected = expected.gather(1, torch.tensor(generation.token_ids)[:, None]).squeeze(1)
        assert generation.logprobs == pytest.approx(expected.tolist(), abs=1e-5)
        # no_repeat_ngram_size = 1 forbids any token already in the sequence.
        repeated |= any(
            t in sequence[: len(prompt) + i] for i, t in enumerate(generation.token_ids)
        )
    assert repeated
    # generate gave back the sequences only: no per-step scores over the vocabulary.
    assert len(returned) == 1 and isinstance(returned[0], torch.Tensor)
    # The checkpoint keeps its own defaults for whoever generates with it next.
    assert (model.generation_config.repetition_penalty, model.generation_config.top_k) == (5.0, 3)


def test_generation_stops_on_every_eos_id_of_the_generation_config() -> None:
    """Gemma 3 and Llama 3 end a turn with a token other than the tokenizer's EOS, listed
    among the generation config's EOS ids; TRL stops on any of them."""
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    prompt = tokenizer.encode(PROMPTS[0], add_special_tokens=False)
    with torch.no_grad():
        first = int(model(input_ids=torch.tensor([prompt])).logits[0, -1].argmax())
    assert first != tokenizer.eos_token_id
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, first]
    backend = TransformersBackend(model, tokenizer, Sampling(max_new_tokens=8, temperature=1e-4))

    [generation] = backend.generate([prompt])

    assert generation.token_ids == [first]
