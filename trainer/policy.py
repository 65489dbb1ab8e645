"""A generation backend as a policy for the client's evaluation runner, so that a
checkpoint is measured by the service exactly like any other agent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from wander.client import AssistantMessage, Message
from wander.client.models import storable
from wander.trainer.backends import Backend, Sampling, TransformersBackend
from wander.trainer.models import load
from wander.trainer.rollout import render


class BackendPolicy:
    """Answers with ``backend``, one templated prompt per game.

    The runner plays many games at once and asks each for its move separately.
    Requests are gathered until none has come for a while, then generated as one
    batch: on a CPU that is several times faster than one at a time, on a GPU a
    batch costs about what one prompt does, and on a vLLM server it is one
    request instead of many. Waiting for a lull rather than a fixed window
    matters: after a batch, its games step the service and ask again a few
    milliseconds apart, and a window opened by the first would split them into
    many small batches.

    How long a lull must be follows what a batch costs: at least
    ``gather_seconds``, and a tenth of the last generation's time, since a
    straggler left for the next batch costs a whole generation. The wait for one
    batch is bounded by ``max_wait_seconds`` or the last generation's time,
    whichever is longer, so a steady stream of requests is still cut. A fixed
    short lull would cut hundreds of games played at once into many small
    batches, each paying a whole generation.

    One batch is generated at a time, in a worker thread: the event loop stays
    free for the games' requests to the service, whose timeouts would otherwise
    run out while a long generation held it.
    """

    def __init__(
        self,
        backend: Backend,
        tokenizer: Any,
        gather_seconds: float = 0.01,
        max_wait_seconds: float = 0.5,
    ) -> None:
        self.backend, self.tokenizer = backend, tokenizer
        self.gather_seconds, self.max_wait_seconds = gather_seconds, max_wait_seconds
        self._pending: list[tuple[list[int], asyncio.Future[str]]] = []
        self._opened = 0.0  # when the wait for the pending requests began
        self._timer: asyncio.TimerHandle | None = None
        self._generating = False
        self._generation_seconds = 0.0  # what the last batch took

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        prompt = render(self.tokenizer, [m.model_dump(mode="json") for m in messages], True)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()
        self._pending.append((self.tokenizer.encode(prompt, add_special_tokens=False), answer))
        if len(self._pending) == 1:
            self._opened = loop.time()
        self._arm(loop)
        return AssistantMessage(content=await answer)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """(Re)start the wait for a lull; while a batch is generated, its end does."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._generating or not self._pending:
            return
        lull = max(self.gather_seconds, self._generation_seconds / 10)
        deadline = self._opened + max(self.max_wait_seconds, self._generation_seconds)
        delay = min(lull, deadline - loop.time())
        self._timer = loop.call_later(max(delay, 0.0), self._start, loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._pending, self._timer = self._pending, [], None
        self._generating = True
        work = loop.run_in_executor(None, self._generate, [ids for ids, _ in batch])
        work.add_done_callback(lambda done: self._finish(loop, batch, done))

    def _generate(self, prompts: list[list[int]]) -> list[str]:
        started = time.perf_counter()
        try:
            generations = self.backend.generate(prompts)
            texts = self.tokenizer.batch_decode(
                [g.token_ids for g in generations], skip_special_tokens=True
            )
            return [storable(text) for text in texts]  # a NUL is a move, not a failed game
        finally:
            self._generation_seconds = time.perf_counter() - started

    def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[list[int], asyncio.Future[str]]],
        done: asyncio.Future[list[str]],
    ) -> None:
        self._generating = False
        error = done.exception()
        texts = done.result() if error is None else []
        for index, (_, answer) in enumerate(batch):
            if answer.cancelled():  # its game was given up while it waited
                continue
            if error is not None:  # every waiting game hears of it; none hangs
                answer.set_exception(error)
            else:
                answer.set_result(texts[index])
        # What came during the generation waits for the games just answered: they
        # step the service and ask again within a lull.
        self._opened = loop.time()
        self._arm(loop)


def transformers_policy(model: str, sampling: Sampling) -> BackendPolicy:
    """``model`` (a checkpoint directory, a hub id, or ``tiny``) sampled in this process."""
    weights, tokenizer = load(model)
    return BackendPolicy(TransformersBackend(weights, tokenizer, sampling), tokenizer)
