"""The rollout assembly: model tokens + environment tokens, the mask, the rewards."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import pytest
from transformers import GenerationConfig
from trl import chat_template_utils

from tests.agents import ScriptedBackend, answer, perfect_agent
from tests.helpers import DeletingClient, archived
from tests.proxy import behind_proxy
from wander.client import ServiceUnavailable, WanderClient
from wander.client.retry import NO_RETRY, PATIENT
from wander.service.archive.migrations import upgrade
from wander.service.backpressure import READ_EVERY
from wander.service.envs.tictactoe.env import INVALID_MOVE_PENALTY
from wander.service.envs.tictactoe.game import optimal_moves
from wander.testing import ServiceProcess
from wander.trainer.backends import Generation, stop_token_ids
from wander.trainer.rollout import (
    ChatTemplateError,
    RolloutFailed,
    Task,
    WanderRollout,
    environment_tokens,
    example_prompt,
    render,
    untrained_tokens,
)
from wander.trainer.tiny import build_tokenizer

COMPONENTS = ["win", "format", "invalid_move"]
OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}
GAME = Task("tictactoe", COMPONENTS, config=OPTIMAL)


def test_completion_is_model_and_environment_tokens_with_the_mask(live: ServiceProcess) -> None:
    tokenizer = build_tokenizer()
    backend = ScriptedBackend(tokenizer)
    with WanderClient(live.url) as client:
        rollout = WanderRollout(client, tokenizer, [GAME], run="rollout-test", backend=backend)
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


def test_train_from_masks_each_turns_thought_and_trains_its_move(live: ServiceProcess) -> None:
    """With ``train_from``, a turn's tokens before the marker are masked like the
    environment's: the trainer learns the moves, and the thoughts stay as sampled."""
    tokenizer = build_tokenizer()
    backend = ScriptedBackend(tokenizer, lambda board: answer(optimal_moves(board, "X")[0], "a b"))
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run="rollout-from", backend=backend, train_from="<move>"
        )
        output = rollout([example_prompt(3)] * 2)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]

    for i, record in enumerate(records):
        completion, mask = output["completion_ids"][i], output["env_mask"][i]
        trained = [t for t, m in zip(completion, mask, strict=True) if m == 1]
        moves = [m.content for m in record.messages if m.role == "assistant"]
        assert len(moves) == record.turn > 1
        expected = "".join(move.removeprefix("<think>a b</think>") for move in moves)
        assert tokenizer.decode(trained, skip_special_tokens=True) == expected
        assert trained.count(tokenizer.eos_token_id) == record.turn  # each turn's end trained


def test_untrained_tokens_are_those_before_the_marker() -> None:
    tokenizer = build_tokenizer()
    ids = tokenizer.encode("Cell 6 wins.\n<move>6</move>", add_special_tokens=False)
    count = untrained_tokens(tokenizer, ids, "<move>")
    assert tokenizer.decode(ids[:count]) == "Cell 6 wins.\n"
    assert tokenizer.decode(ids[count:]) == "<move>6</move>"
    assert untrained_tokens(tokenizer, ids[count:], "<move>") == 0
    assert untrained_tokens(tokenizer, ids[:count], "<move>") == 0  # no marker: trained whole
    assert untrained_tokens(tokenizer, ids, None) == 0


class ReversingBackend(ScriptedBackend):
    """Plays tic-tac-toe as ``ScriptedBackend`` does and reverses a text the right way
    round: one backend for a batch of both environments."""

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        self.batch_sizes.append(len(prompts))
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            if "<reversed_text>" not in text:
                out += super().generate([prompt])
                self.batch_sizes.pop()
                continue
            given = text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            said = f"<reversed_text>{given[::-1]}</reversed_text>"
            ids = [*self.tokenizer.encode(said, add_special_tokens=False), self.end]
            out.append(Generation(ids, [-0.5] * len(ids)))
        return out


def test_a_batch_of_several_tasks_plays_each_on_its_own_environment(
    live: ServiceProcess,
) -> None:
    """Groups of tic-tac-toe and reverse_text in one batch, generated for together; each
    task's fields hold its own episodes' scores and None for the other's."""
    tokenizer = build_tokenizer()
    backend = ReversingBackend(tokenizer)
    tasks = [GAME, Task("reverse_text", ["lcs", "format"], metrics=["chars"])]
    handles = [example_prompt(3, "tictactoe")] * 2 + [example_prompt(5, "reverse_text")] * 2
    with WanderClient(live.url) as client:
        rollout = WanderRollout(client, tokenizer, tasks, run="rollout-mixed", backend=backend)
        output = rollout(handles)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]
        with pytest.raises(ValueError, match="names no task of several"):
            rollout([example_prompt(3)])
        with pytest.raises(ValueError, match="names task 'sql'; the rollout's"):
            rollout([example_prompt(3, "sql")])

    assert [(r.env, r.example, r.split) for r in records] == [
        ("tictactoe", 3, "train"), ("tictactoe", 3, "train"),
        ("reverse_text", 5, "train"), ("reverse_text", 5, "train"),
    ]  # fmt: skip
    assert backend.batch_sizes[0] == 4  # the first turn of all four, generated together
    assert list(rollout.fields) == [
        "tictactoe/win", "tictactoe/format", "tictactoe/invalid_move",
        "reverse_text/lcs", "reverse_text/format", "reverse_text/chars",
    ]  # fmt: skip
    assert output["wander_task"] == ["tictactoe"] * 2 + ["reverse_text"] * 2
    assert output["wander_failed"] == [False] * 4
    assert output["tictactoe/win"][2:] == output["reverse_text/lcs"][:2] == [None, None]
    assert output["tictactoe/format"][:2] == [1.0, 1.0]  # the scripted answers are well-formed
    assert output["reverse_text/lcs"][2:] == [1.0, 1.0]  # reversed exactly
    assert all(isinstance(chars, float) and chars > 0 for chars in output["reverse_text/chars"][2:])


def taken_cell_agent(board: str) -> str:
    """Plays a taken cell while there is one (so again and again), else the best move."""
    taken = [cell for cell, mark in enumerate(board) if mark != "."]
    return answer(taken[0]) if taken else perfect_agent(board)


def test_a_rewarded_metric_comes_back_per_episode_as_a_number(live: ServiceProcess) -> None:
    """The count of invalid moves, where the invalid_move component marks a game once."""
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [replace(GAME, metrics=["invalid_moves"])],
            run="rollout-metric",
            backend=ScriptedBackend(tokenizer, taken_cell_agent),
        )
        output = rollout([example_prompt(3)] * 2 + [example_prompt(8)] * 2)
        scores = [client.score(episode_id) for episode_id in output["episode_id"]]
    counts = [score.metrics["invalid_moves"] for score in scores]
    assert output["invalid_moves"] == [float(count) for count in counts]
    assert max(counts) > 1 and set(output["invalid_move"]) == {INVALID_MOVE_PENALTY}


@pytest.mark.parametrize(
    ("name", "held"),
    [("outcome", "str, not a number, in"), ("invalid_move_count", "absent from")],
)
def test_a_rewarded_metric_that_is_no_number_stops_the_run_naming_those_that_are(
    live: ServiceProcess, name: str, held: str
) -> None:
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [replace(GAME, metrics=[name])],
            run="rollout-metric-wrong",
            backend=ScriptedBackend(tokenizer),
        )
        numeric = "invalid_moves, model_starts, random_move_prob, turns"
        with pytest.raises(ValueError, match=rf"'{name}', {held} .*\(numeric metrics: {numeric}\)"):
            rollout([example_prompt(3)])


class NulBackend(ScriptedBackend):
    """The scripted answers with a NUL after them: an untrained model samples any byte."""

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        nul = self.tokenizer.encode("\0", add_special_tokens=False)
        answers = [[*g.token_ids[:-1], *nul, g.token_ids[-1]] for g in super().generate(prompts)]
        return [Generation(ids, [-0.5] * len(ids)) for ids in answers]


def test_a_sampled_nul_is_sent_as_a_replacement_character(live: ServiceProcess) -> None:
    """The service refuses NUL (PostgreSQL cannot store it); one sampled NUL must not fail
    the batch of steps, and so the training step."""
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run="rollout-nul", backend=NulBackend(tokenizer)
        )
        output = rollout([example_prompt(3)] * 2)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]
    answers = [m.content for r in records for m in r.messages if m.role == "assistant"]
    assert answers and all(a is not None and a.endswith("\ufffd") for a in answers)


class SpelledStopBackend(ScriptedBackend):
    """The scripted answers, then ``<|im_end|>`` written in ordinary tokens and a tail,
    then the real end of the turn: a model that writes its stop token as text."""

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        spelled = [
            token
            for piece in ("<|", "im_end", "|>", " tail")
            for token in self.tokenizer.encode(piece, add_special_tokens=False)
        ]
        scripted = super().generate(prompts)
        answers = [[*g.token_ids[:-1], *spelled, g.token_ids[-1]] for g in scripted]
        self.generated[-len(answers) :] = answers
        return [Generation(ids, [-0.5] * len(ids)) for ids in answers]


def test_a_stop_token_written_as_text_is_trained_once_as_sampled(live: ServiceProcess) -> None:
    """The template's rendering of ``...<|im_end|> tail`` reads the text back as the stop
    token; the model's turn still ends at the template's own, so the tail is in the
    sequence once, as sampled, and not again as the environment's."""
    tokenizer = build_tokenizer()
    backend = SpelledStopBackend(tokenizer)
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run="rollout-spelled-stop", backend=backend
        )
        output = rollout([example_prompt(3)])
        [record] = [client.episode(episode_id) for episode_id in output["episode_id"]]
    answers = [m.content or "" for m in record.messages if m.role == "assistant"]
    assert len(answers) >= 3 and all(a.endswith("<|im_end|> tail") for a in answers)
    completion, mask = output["completion_ids"][0], output["env_mask"][0]
    model = [t for t, m in zip(completion, mask, strict=True) if m == 1]
    assert model == [token for ids in backend.generated for token in ids]
    sequence = tokenizer.decode(output["prompt_ids"][0] + completion)
    assert sequence.count(" tail") == len(answers)


@pytest.mark.parametrize("model_ended", [True, False], ids=["stopped", "cut-off"])
def test_a_stop_token_that_is_a_word_piece_ends_the_turn_where_the_template_does(
    model_ended: bool,
) -> None:
    """A model whose generation config declares an ordinary word piece a stop token
    ("Avai", as the vLLM tests' stage does) and whose answer holds those letters inside
    a longer piece ("TAvail" reads back as "T", "Avail"): the answer holds no stop token,
    so the environment's tokens start at the template's end of the turn (CI once failed
    here: the letters were counted as a stop token written as text, and none was left
    for the template's)."""
    tokenizer = build_tokenizer()
    piece = tokenizer.convert_tokens_to_ids("Avai")
    said = "TAvail 38 Availab"
    assert piece not in tokenizer.encode(said, add_special_tokens=False)
    messages = [{"role": "user", "content": "Your move."}]
    before = render(tokenizer, messages, True)
    reply = {"role": "user", "content": "Invalid move."}
    after = render(tokenizer, [*messages, {"role": "assistant", "content": said}, reply], True)
    stops = [tokenizer.eos_token_id, piece]
    following = environment_tokens(tokenizer, before, after, stops, model_ended, said)
    template = tokenizer.encode(after[len(before) + len(said) :], add_special_tokens=False)
    assert template[0] == tokenizer.eos_token_id  # the template's <|im_end|>
    assert following == (template[1:] if model_ended else template)


@pytest.mark.parametrize(
    ("padding", "budget"), [(40, 60), (0, 30)], ids=["the-model-turn-is-cut", "the-reply-is-cut"]
)
def test_a_completion_never_exceeds_max_completion_length(
    padding: int, budget: int, live: ServiceProcess
) -> None:
    """A turn is asked for no more than what is left, and kept within it whatever the
    model wrote; the environment's reply is cut too: the completion is exactly the budget,
    and the episode ends there."""
    tokenizer = build_tokenizer()
    backend = ScriptedBackend(tokenizer, lambda board: perfect_agent(board) + " pad" * padding)
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="rollout-budget",
            backend=backend,
            max_completion_length=budget,
        )
        output = rollout([example_prompt(3)] * 2)
    assert [len(c) for c in output["completion_ids"]] == [budget, budget]
    assert [len(m) for m in output["env_mask"]] == [budget, budget]


class FallingOverBackend(ScriptedBackend):
    """Answers the first turn, then fails, as a generation server that fell over."""

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        if self.batch_sizes:
            raise RuntimeError("the generation server fell over")
        return super().generate(prompts)


def test_a_rollout_that_fails_aborts_the_episodes_it_was_playing(live: ServiceProcess) -> None:
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="rollout-fell-over",
            backend=FallingOverBackend(tokenizer),
        )
        with pytest.raises(RuntimeError, match="fell over"):
            rollout([example_prompt(3)] * 2)
        assert client.retry is not NO_RETRY  # the client's own retries, given back
        page = archived(client, "rollout-fell-over", 2)
    assert [(e.status, e.turn) for e in page.episodes] == [("aborted", 1), ("aborted", 1)]


class RefusingBackend(ScriptedBackend):
    """Answers every prompt but the second of the first turn, which its server refuses."""

    def generate(self, prompts: list[list[int]], max_tokens: int | None = None) -> list[Generation]:
        answers = super().generate(prompts)
        if len(self.batch_sizes) == 1:
            answers[1] = Generation([], None, "Request failed: 400, past the context")
        return answers


def test_a_request_the_server_refuses_fails_that_episode_not_the_run(
    live: ServiceProcess,
) -> None:
    tokenizer = build_tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="rollout-refused",
            backend=RefusingBackend(tokenizer),
            max_failure_rate=0.5,
        )
        output = rollout([example_prompt(3)] * 4)
        refused = client.episode(output["episode_id"][1])
        played = client.episode(output["episode_id"][0])
    assert (refused.status, played.status) == ("aborted", "done")
    assert output["win"][1] is None and output["win"][0] is not None
    assert set(output["env_mask"][1]) == {0} and output["completion_ids"][1]


def canonical_agent(board: str) -> str:
    """The perfect agent's answers as the chat templates write an assistant turn with
    reasoning (Qwen3's puts the reasoning on lines of its own), so that each template
    renders the answer exactly as it was sampled."""
    return f"<think>\nthinking\n</think>\n\n<move>{optimal_moves(board, 'X')[0]}</move>"


@dataclass(frozen=True)
class Family:
    """A model family's chat template (as TRL ships it) and the tokens it needs, added
    to the offline tokenizer: its own BOS and EOS, and the token that ends a turn
    (the generation config's EOS ids, as the family's checkpoints list them)."""

    template: str
    specials: list[str]
    eos: str
    end_of_turn: str
    bos: str | None = None
    tail: str = "\n"  # what a conversation ending with the assistant renders after its stop token

    def tokenizer(self) -> Any:
        tokenizer = build_tokenizer()
        tokenizer.add_tokens(self.specials, special_tokens=True)
        tokenizer.eos_token = self.eos
        if self.bos is not None:
            tokenizer.bos_token = self.bos
        tokenizer.chat_template = self.template
        return tokenizer


FAMILIES = {
    "qwen2_5": Family(chat_template_utils.qwen2_5_chat_template, [], "<|im_end|>", "<|im_end|>"),
    "qwen3": Family(chat_template_utils.qwen3_chat_template, [], "<|im_end|>", "<|im_end|>"),
    "llama3": Family(
        chat_template_utils.llama3_chat_template,
        ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
         "<|end_of_text|>"],
        eos="<|end_of_text|>", end_of_turn="<|eot_id|>", bos="<|begin_of_text|>", tail="",
    ),
    "gemma3": Family(
        chat_template_utils.gemma3_chat_template,
        ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"],
        eos="<eos>", end_of_turn="<end_of_turn>", bos="<bos>",
    ),
    "lfm2": Family(
        chat_template_utils.lfm2_chat_template, ["<|startoftext|>"], "<|im_end|>", "<|im_end|>",
        bos="<|startoftext|>",
    ),
    "phi3": Family(
        chat_template_utils.phi3_chat_template,
        ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"],
        eos="<|endoftext|>", end_of_turn="<|end|>", tail="\n<|endoftext|>",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", FAMILIES)
def test_each_familys_template_cuts_into_the_models_turns_and_the_environments(
    name: str, live: ServiceProcess
) -> None:
    family = FAMILIES[name]
    tokenizer = family.tokenizer()
    end = tokenizer.convert_tokens_to_ids(family.end_of_turn)
    stops = stop_token_ids(tokenizer, GenerationConfig(eos_token_id=[end]))
    backend = ScriptedBackend(tokenizer, canonical_agent, end=end)
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run=f"template-{name}", backend=backend, stop_ids=stops
        )
        output = rollout([example_prompt(3)] * 2)
        records = [client.episode(episode_id) for episode_id in output["episode_id"]]

    # TRL's training copy of the family's template renders the conversation.
    assert rollout.chat_template == chat_template_utils.get_training_chat_template(tokenizer)
    assert rollout.chat_template is not None
    for i, record in enumerate(records):
        messages = [m.model_dump(mode="json") for m in record.messages]
        completion, mask = output["completion_ids"][i], output["env_mask"][i]
        assert record.turn >= 3 and len(completion) == len(mask)
        # Prompt + the model's tokens + the environment's tokens are the template's
        # rendering of the conversation, up to the model's last stop token.
        sequence = tokenizer.decode(output["prompt_ids"][i] + completion)
        rendered = render(tokenizer, messages[:-1], False, rollout.chat_template)
        assert rendered == sequence + family.tail
        # The model's tokens are its answers, each ended by the family's end of turn.
        model = [t for t, m in zip(completion, mask, strict=True) if m == 1]
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        turns = [[*tokenizer.encode(a, add_special_tokens=False), end] for a in answers]
        assert model == [token for turn in turns for token in turn]


def test_a_model_turn_the_template_writes_otherwise_stays_as_sampled(
    live: ServiceProcess,
) -> None:
    """Qwen3's template puts an answer's reasoning on lines of its own; the model's turn
    stays as the model wrote it, everything around it is the template's."""
    tokenizer = FAMILIES["qwen3"].tokenizer()
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run="template-as-sampled", backend=ScriptedBackend(tokenizer)
        )
        output = rollout([example_prompt(3)])
        [record] = [client.episode(episode_id) for episode_id in output["episode_id"]]
    messages = [m.model_dump(mode="json") for m in record.messages]
    sequence = tokenizer.decode(output["prompt_ids"][0] + output["completion_ids"][0])
    rendered = render(tokenizer, messages[:-1], False, rollout.chat_template)
    assert "<think>thinking</think><move>" in sequence
    assert (
        rendered
        == sequence.replace("<think>thinking</think>", "<think>\nthinking\n</think>\n\n") + "\n"
    )


def test_a_turn_ending_with_no_stop_token_of_the_model_fails_loudly(
    live: ServiceProcess,
) -> None:
    """Gemma 3 ends a turn with <end_of_turn>, its tokenizer's EOS is <eos>: a model whose
    stop tokens miss <end_of_turn> is refused, naming it, rather than trained on the
    whole conversation again as "the environment's tokens"."""
    tokenizer = FAMILIES["gemma3"].tokenizer()
    end = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="template-no-stop",
            backend=ScriptedBackend(tokenizer, end=end),
        )
        with pytest.raises(ChatTemplateError, match=r"none of the model's stop tokens \['<eos>'\]"):
            rollout([example_prompt(3)])


GROWING_SYSTEM = (
    "<|im_start|>system\n{{ messages | length }} messages so far<|im_end|>\n"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_template_that_renders_earlier_turns_otherwise_fails_loudly(
    live: ServiceProcess,
) -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = GROWING_SYSTEM
    with WanderClient(live.url) as client:
        rollout = WanderRollout(
            client, tokenizer, [GAME], run="template-growing", backend=ScriptedBackend(tokenizer)
        )
        with pytest.raises(ChatTemplateError, match="renders the conversation's earlier turns"):
            rollout([example_prompt(3)])


@pytest.mark.parametrize("at", [1, 2], ids=["first step", "second step"])
def test_a_failed_episode_is_left_out_of_training_and_counted(
    live: ServiceProcess, caplog: pytest.LogCaptureFixture, at: int
) -> None:
    """Failed at its first step too: its completion is not empty (TRL reads the last
    token of each)."""
    tokenizer = build_tokenizer()
    with DeletingClient(live.url, at) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="rollout-failed",
            backend=ScriptedBackend(tokenizer),
            max_failure_rate=0.25,
        )
        output = rollout([example_prompt(3)] * 2 + [example_prompt(8)] * 2)
    [deleted] = client.deleted
    failed = output["episode_id"].index(deleted)
    for i in range(4):
        components = [output[name][i] for name in COMPONENTS]
        if i == failed:  # no reward, and not one of its tokens trained on
            assert components == [None, None, None]
            assert output["completion_ids"][i] and set(output["env_mask"][i]) == {0}
        else:
            assert all(isinstance(value, float) for value in components)
            assert 1 in output["env_mask"][i]
    [warning] = [r for r in caplog.records if r.name == "wander.trainer.rollout"]
    assert warning.getMessage().startswith(
        f"1 of 4 episodes of the batch failed (the first, {deleted}: episode_done: episode "
        f"{deleted} is aborted)"
    )


def test_failures_above_the_rate_stop_the_run(live: ServiceProcess) -> None:
    tokenizer = build_tokenizer()
    with DeletingClient(live.url) as client:
        rollout = WanderRollout(
            client,
            tokenizer,
            [GAME],
            run="rollout-failing",
            backend=ScriptedBackend(tokenizer),
            max_failure_rate=0.2,
        )
        with pytest.raises(
            RolloutFailed, match=r"1 of 4 episodes .* more than max_failure_rate = 0.2 of the batch"
        ):
            rollout([example_prompt(3)] * 2 + [example_prompt(8)] * 2)


def test_a_training_runs_rollout_rides_through_the_archives_backpressure(
    postgresql_url: str,
) -> None:
    """The archive's database cut off, games finish past ``WANDER_ARCHIVE_BACKLOG_MAX``:
    creating answers 503 ``archive_backlog``, and a training run's rollout (its client
    is ``PATIENT``, as ``GRPORunConfig.client`` makes it) waits it out, completing once
    the database is back and the backlog drained."""
    upgrade(postgresql_url)
    tokenizer = build_tokenizer()
    with behind_proxy(postgresql_url) as (outage, url):
        settings = {"WANDER_DATABASE_URL": url, "WANDER_ARCHIVE_BACKLOG_MAX": "2"}
        service = ServiceProcess(settings).start()
        try:
            with WanderClient(service.url, retry=PATIENT) as client:
                backend = ScriptedBackend(tokenizer)
                rollout = WanderRollout(client, tokenizer, [GAME], run="ride", backend=backend)
                outage.down()
                rollout([example_prompt(3)] * 2 + [example_prompt(8)] * 2)  # 4 finished
                time.sleep(READ_EVERY)  # the backlog a process counted stands this long
                with (
                    WanderClient(service.url, retry=NO_RETRY) as impatient,
                    pytest.raises(ServiceUnavailable) as refused,
                ):
                    impatient.create("tictactoe")
                assert refused.value.code == "archive_backlog"
                back = threading.Timer(2.0, outage.up)
                back.start()
                started = time.monotonic()
                output = rollout([example_prompt(5)] * 2)
                back.join()
            assert time.monotonic() - started > 1.5  # it waited for the archive
            assert len(output["episode_id"]) == 2 and None not in output["win"]
        finally:
            service.stop()
