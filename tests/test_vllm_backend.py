"""The vLLM backend through TRL's real ``VLLMClient``, against a stand-in server.

vLLM itself does not run here (no GPU), so a small HTTP server answers the three
OpenAI-compatible endpoints the client uses (``/health``, ``/v1/models``,
``/v1/completions`` with ``return_token_ids``) the way ``vllm serve`` documents
them. What is tested is everything on our side of the wire: the request TRL's
client sends for our sampling settings, and how the backend reads the reply.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

vllm_client = pytest.importorskip("trl.generation.vllm_client")

from wander.trainer.backends import Sampling, VLLMServerBackend  # noqa: E402

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


@pytest.fixture
def stand_in() -> Iterator[str]:
    StandIn.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


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
