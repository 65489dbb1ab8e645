"""The vLLM server a run generates on (``[grpo] use_vllm = true``, ``vllm_mode =
"server"``): where TRL looks for it, how to start it, and a check, before the
model loads, that what answers there is one.

TRL's client waits for ``/health`` to answer 200 and retries any other answer for
ever, so a run pointed at a server that is not vLLM (Wander, say, on the port
both default to: Wander has ``/healthz``, not ``/health``) would hang without a
word. ``check`` turns that into an error naming the URL, at once.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

import httpx

SERVE_FLAGS = (
    "--weight-transfer-config",
    '{"backend": "nccl"}',
    "--logprobs-mode",
    "processed_logprobs",
    "--max-logprobs",
    "-1",
)
"""What TRL 1.16 needs of ``vllm serve`` (its deprecated ``trl vllm-serve`` adds the
same): the NCCL weight-transfer engine TRL pushes the trained weights through, and
the logprobs of the distribution sampled from (after the temperature), which the
loss's importance weights compare with. The server also needs
``VLLM_SERVER_DEV_MODE=1`` in its environment: the weight-transfer endpoints are
dev-mode ones."""

RETRY_SECONDS = 2.0


class VLLMServerError(RuntimeError):
    """What answers at the vLLM server's URL is not a vLLM server, or nothing did in time."""


def server_url(args: Any) -> str | None:
    """The URL TRL's client uses for a ``GRPOConfig`` (``vllm_server_base_url``, else
    ``vllm_server_host`` and ``vllm_server_port``); None where the run generates
    without a vLLM server."""
    if not (args.use_vllm and args.vllm_mode == "server"):
        return None
    return args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"


def serve_command(model: str, url: str) -> str:
    """The command that starts a vLLM server for ``model`` on ``url``'s port."""
    port = httpx.URL(url).port or 8000
    command = ["vllm", "serve", model, "--port", str(port), *SERVE_FLAGS]
    return "VLLM_SERVER_DEV_MODE=1 " + shlex.join(command)


def check(url: str, model: str, timeout: float) -> None:
    """Return once ``url`` answers as a vLLM server: 200 on ``/health``, and the
    model list on ``/v1/models``.

    A server that answers ``/health`` with anything but 200 or a 5xx has no such
    route (a 404 from Wander): an error at once. An unreachable server, or a 5xx
    (a proxy in front of a vLLM that is still loading), is waited for, as TRL waits:
    up to ``timeout`` seconds (``vllm_server_timeout``).
    """
    start = f"Start one with `{serve_command(model, url)}`, and set [grpo] vllm_server_base_url"
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=10.0) as http:
        while True:
            try:
                health = http.get(f"{url}/health")
            except httpx.TransportError as exc:
                problem = f"cannot be reached ({exc})"
            else:
                if health.status_code == 200:
                    break
                if health.status_code < 500:
                    raise VLLMServerError(
                        f"{url} is not a vLLM server: it answers {health.status_code} on "
                        f"/health. {start} (or --vllm-url) to its URL."
                    )
                problem = f"answers {health.status_code} on /health"
            if time.monotonic() >= deadline:
                raise VLLMServerError(
                    f"the vLLM server at {url} {problem} after {timeout:g} s. {start}."
                )
            time.sleep(RETRY_SECONDS)
        models = http.get(f"{url}/v1/models")
    if models.status_code != 200 or not _served(models):
        raise VLLMServerError(
            f"{url} is not a vLLM server: /health answers, but /v1/models answers "
            f"{models.status_code} without the model it serves. {start} (or --vllm-url) to "
            "its URL."
        )


def _served(models: httpx.Response) -> bool:
    """Whether a ``/v1/models`` answer lists a model, as vLLM's does (TRL reads the first)."""
    try:
        return bool(models.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        return False
