"""The rollout assembly: model tokens + environment tokens, the mask, the rewards."""

from __future__ import annotations

from tests.agents import ScriptedBackend
from wander.client import WanderClient
from wander.testing import ServiceProcess
from wander.trainer.backends import Generation
from wander.trainer.rollout import WanderRollout, example_prompt, render
from wander.trainer.tiny import build_tokenizer

COMPONENTS = ["win", "format", "invalid_move"]
OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


def test_completion_is_model_and_environment_tokens_with_the_mask(live: ServiceProcess) -> None:
    tokenizer = build_tokenizer()
    backend = ScriptedBackend(tokenizer)
    with WanderClient(live.url) as client:
        rollout = WanderRollout(client, "tictactoe", tokenizer, COMPONENTS, config=OPTIMAL,
                                run="rollout-test", backend=backend)  # fmt: skip
        prompts = [example_prompt(3)] * 2 + [example_prompt(8)] * 2
        output = rollout(prompts)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]
        scores = [client.score(episode_id) for episode_id in output["episode_id"]]

    assert [r.example for r in records] == [3, 3, 8, 8]
    assert records[0].group == records[1].group != records[2].group == records[3].group
    assert {r.seed for r in records[:2]} == {records[0].seed}
    for name in COMPONENTS:
        assert output[name] == [score.components[name] for score in scores]
    assert all(score.metrics["outcome"] == "draw" for score in scores)

    for i, record in enumerate(records):
        messages = [m.model_dump(mode="json") for m in record.messages]
        completion, mask = output["completion_ids"][i], output["env_mask"][i]
        assert len(completion) == len(mask) == len(output["logprobs"][i])
        # The prompt is the templated opening, and prompt + completion is the templated
        # conversation up to the model's last turn (the closing reply teaches nothing):
        # the model's turns as generated, the environment's as the template renders them.
        assert output["prompt_ids"][i] == tokenizer.encode(render(tokenizer, messages[:2], True))
        full = tokenizer.decode(output["prompt_ids"][i] + completion)
        assert full == render(tokenizer, messages[:-1], False).removesuffix("\n")
        # The unmasked tokens are exactly the model's turns, each as the backend
        # generated it (its end-of-turn token included), and nothing else.
        model = [t for t, m in zip(completion, mask, strict=True) if m == 1]
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        assert len(answers) == record.turn
        turn_ids = [tokenizer.encode(a, add_special_tokens=False) for a in answers]
        assert model == [t for ids in turn_ids for t in [*ids, tokenizer.eos_token_id]]
        assert all([*ids, tokenizer.eos_token_id] in backend.generated for ids in turn_ids)
        environment = [t for t, m in zip(completion, mask, strict=True) if m == 0]
        assert tokenizer.decode(environment).count("<|im_start|>user") == record.turn - 1
        assert all(lp == 0.0 for lp, m in zip(output["logprobs"][i], mask, strict=True) if m == 0)
        assert all(lp == -0.5 for lp, m in zip(output["logprobs"][i], mask, strict=True) if m == 1)


class NulBackend(ScriptedBackend):
    """The scripted answers with a NUL after them: an untrained model samples any byte."""

    def generate(self, prompts: list[list[int]]) -> list[Generation]:
        nul = self.tokenizer.encode("\0", add_special_tokens=False)
        answers = [[*g.token_ids[:-1], *nul, g.token_ids[-1]] for g in super().generate(prompts)]
        return [Generation(ids, [-0.5] * len(ids)) for ids in answers]


def test_a_sampled_nul_is_sent_as_a_replacement_character(live: ServiceProcess) -> None:
    """The service refuses NUL (PostgreSQL cannot store it); one sampled NUL must not fail
    the batch of steps, and so the training step."""
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(client, "tictactoe", tokenizer, COMPONENTS, config=OPTIMAL,
                                run="rollout-nul", backend=NulBackend(tokenizer))  # fmt: skip
        output = rollout([example_prompt(3)] * 2)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]
    answers = [m.content for r in records for m in r.messages if m.role == "assistant"]
    assert answers and all(a is not None and a.endswith("\ufffd") for a in answers)
