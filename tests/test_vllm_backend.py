"""The vLLM backend through TRL's real ``VLLMClient``, against a stand-in server.

vLLM itself does not run here (no GPU), so a small HTTP server answers the three
OpenAI-compatible endpoints the client uses (``/health``, ``/v1/models``,
``/v1/completions`` with ``return_token_ids``) the way ``vllm serve`` documents
them. What is tested is everything on our side of the wire: the request TRL's
client sends for our sampling settings, how the backend reads the reply, and
the check that what answers where a run looks for vLLM is one (a real Wander
service, and a stand-in with a ``/health`` but no model list, are not).
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

vllm_client = pytest.importorskip("trl.generation.vllm_client")
vllm_generation = pytest.importorskip("trl.generation.vllm_generation")

from wander.cli import app as cli  # noqa: E402
from wander.testing import ServiceProcess, free_port  # noqa: E402
from wander.trainer.backends import Sampling, VLLMServerBackend  # noqa: E402
from wander.trainer.vllm_server import SERVE_FLAGS, VLLMServerError, check, serve_command  # noqa: E402

MODEL = "wander/stand-in"


def completion(prompt: list[int], max_tokens: int) -> dict[str, Any]:
    """A choice as vLLM returns it: prompt + 1, + 2, ... with logprob -0.5 each."""
    tokens = [prompt[-1] + k for k in range(1, max_tokens + 1)]
    return {
        "index": 0,
        "text": "",
        "prompt_token_ids": prompt,
        "token_ids": tokens,
        "logprobs": {
            "tokens": [f"token_id:{token}" for token in tokens],
            "token_logprobs": [-0.5] * len(tokens),
            "top_logprobs": [None] * len(tokens),
        },
        "finish_reason": "length",
    }


class StandIn(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._answer({})
        else:
            self._answer({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, **payload})
        choices = [completion(p, payload["max_tokens"]) for p in payload["prompt"]]
        self._answer({"id": "cmpl-1", "object": "text_completion", "choices": choices})

    def log_message(self, *args: Any) -> None:
        return None


class HealthOnly(StandIn):
    """A server with a ``/health`` of its own and no model list: not vLLM either."""

    def do_GET(self) -> None:
        self._answer({"status": "ok"})


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a free port of this machine, for the block; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def stand_in() -> Iterator[str]:
    StandIn.requests = []
    with serving(StandIn) as url:
        yield url


def test_the_backend_sends_our_sampling_and_reads_ids_and_logprobs(
    stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client refuses to start without the vllm package; only that check is bypassed.
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *a, **k: True)
    client = vllm_client.VLLMClient(base_url=stand_in)
    backend = VLLMServerBackend(client, Sampling(max_new_tokens=3, temperature=1.25, top_p=0.9))

    generations = backend.generate([[5, 6, 7], [40]])

    assert [g.token_ids for g in generations] == [[8, 9, 10], [41, 42, 43]]
    assert [g.logprobs for g in generations] == [[-0.5] * 3, [-0.5] * 3]
    [request] = StandIn.requests
    assert request["path"] == "/v1/completions"
    assert request["model"] == MODEL
    assert request["prompt"] == [[5, 6, 7], [40]]
    assert (request["n"], request["max_tokens"], request["logprobs"]) == (1, 3, 0)
    assert (request["temperature"], request["top_p"]) == (1.25, 0.9)
    assert request["return_token_ids"] is True


class ShortContext(StandIn):
    """A server of a 4-token context: a longer prompt is refused with 400, as vLLM refuses
    one past ``--max-model-len``."""

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, **payload})
        if any(len(prompt) > 4 for prompt in payload["prompt"]):
            message = "This model's maximum context length is 4 tokens."
            data = json.dumps({"error": {"message": message, "code": 400}}).encode()
            self.send_response(400)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        choices = [completion(p, payload["max_tokens"]) for p in payload["prompt"]]
        self._answer({"id": "cmpl-1", "object": "text_completion", "choices": choices})


def test_a_prompt_the_server_refuses_fails_alone_and_a_turn_asks_for_what_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *a, **k: True)
    ShortContext.requests = []
    with serving(ShortContext) as url:
        client = vllm_client.VLLMClient(base_url=url)
        backend = VLLMServerBackend(client, Sampling(max_new_tokens=3))
        generations = backend.generate([[1, 2, 3, 4, 5], [40]], max_tokens=2)

    refused, answered = generations
    assert refused.token_ids == [] and refused.failure is not None
    assert "maximum context length is 4 tokens" in refused.failure
    assert (answered.token_ids, answered.failure) == ([41, 42], None)
    # The batch, then each prompt alone, every request for at most what is left.
    assert [r["prompt"] for r in ShortContext.requests] == [[[1, 2, 3, 4, 5], [40]],
                                                            [[1, 2, 3, 4, 5]], [[40]]]  # fmt: skip
    assert {r["max_tokens"] for r in ShortContext.requests} == {2}


def test_the_serve_command_has_the_flags_trl_imposes() -> None:
    """TRL 1.16's deprecated `trl vllm-serve` now runs `vllm serve` with the flags its
    trainers need; ours are those (`--enable-scale-out` is for multimodal prompts)."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    theirs = build_command(ScriptArguments(model="org/model", port=8001))
    assert "--enable-scale-out" not in theirs  # only where vLLM >= 0.30 is installed
    assert theirs[-len(SERVE_FLAGS) :] == list(SERVE_FLAGS)
    assert serve_command("org/model", "http://vllm:8001") == (
        "VLLM_SERVER_DEV_MODE=1 vllm serve org/model --port 8001 --weight-transfer-config "
        """'{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1"""
    )


def test_the_check_passes_a_vllm_server_only(stand_in: str) -> None:
    check(stand_in, "org/model", timeout=5)
    with serving(HealthOnly) as url, pytest.raises(VLLMServerError) as refused:
        check(url, "org/model", timeout=5)
    assert str(refused.value).startswith(
        f"{url} is not a vLLM server: /health answers, but /v1/models answers 200 without"
    )


@pytest.fixture(scope="module")
def wander(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A real Wander service: a server that answers, but is no vLLM."""
    database = f"sqlite:///{tmp_path_factory.mktemp('archive')}/archive.db"
    process = ServiceProcess({"WANDER_REDIS_URL": "", "WANDER_DATABASE_URL": database}).start()
    yield process
    process.stop()


@pytest.mark.timeout(60)  # TRL's own client waited for ever here
def test_a_run_pointed_at_wander_for_vllm_stops_at_once_naming_the_url(
    wander: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wander on the URL where the run looks for vLLM (the port both default to): an
    error within seconds that names the URL, before the model loads; not TRL's wait
    for a 200 on /health, which Wander never gives."""
    for module in (vllm_client, vllm_generation):  # as if vLLM were installed
        monkeypatch.setattr(module, "is_vllm_available", lambda *a, **k: True)
    config = tmp_path / "vllm.toml"
    config.write_text(f"""
model = "tiny"
env = "tictactoe"
examples = 4
output_dir = "{tmp_path / "out"}"
[grpo]
num_generations = 2
generation_batch_size = 4
per_device_train_batch_size = 4
max_steps = 1
use_vllm = true
vllm_mode = "server"
vllm_server_base_url = "{wander.url}"
""")
    command = ["train", "grpo", "--config", str(config), "--url", wander.url]
    started = time.monotonic()
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, command)
    assert time.monotonic() - started < 10
    assert result.exit_code == 1, result.output
    assert f"Error: {wander.url} is not a vLLM server: it answers 404 on /health" in result.output
    assert "VLLM_SERVER_DEV_MODE=1 vllm serve tiny --port" in result.output
    assert not (tmp_path / "out").exists()
    # --vllm-url (compose's trainer: http://vllm:8001) goes before the config's URL.
    config.write_text(config.read_text().replace(wander.url, "http://127.0.0.1:1"))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, [*command, "--vllm-url", wander.url])
    assert f"Error: {wander.url} is not a vLLM server" in result.output


def test_an_unreachable_vllm_server_is_waited_for_then_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(VLLMServerError, match=f"the vLLM server at {url} cannot be reached"):
        check(url, "org/model", timeout=0)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("page", ["README.md", "docs/training.md"])
def test_the_docs_start_vllm_as_trl_needs_it(page: str) -> None:
    """The command the docs give is the one TRL 1.16 needs, the weight sync's flags
    included, not the deprecated `trl vllm-serve`."""
    text = (Path(__file__).parents[1] / page).read_text("utf-8")
    assert "VLLM_SERVER_DEV_MODE=1 vllm serve LiquidAI/LFM2-1.2B --port 8001 \\\n" in text
    assert f"  {shlex.join(SERVE_FLAGS)}\n" in text
    assert "with `trl vllm-serve" not in text
