"""The stored episode has a size limit: a step that would make it larger
than ``WANDER_MAX_EPISODE_BYTES`` is refused with 413 and changes nothing, alone or in
a batch, on both stores. Two 12.5 KB sql actions used to make a 116 MB episode, and
past Redis's 512 MB a 503 that clients retried for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import create, error_of, service, step
from wander.client import AsyncWanderClient, PayloadTooLarge, Retry
from wander.service.settings import Settings

LIMIT = 65_536
BIG = "x" * 20_000
"""An invalid tic-tac-toe move: stored twice (in the messages and as the last step)."""


@pytest.fixture
async def limited(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The service on either store, keeping episodes of at most ``LIMIT`` bytes."""
    async with service(settings.model_copy(update={"max_episode_bytes": LIMIT})) as started:
        yield started


@pytest.fixture
def small(limited: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return limited[1]


async def grow(api: httpx.AsyncClient) -> tuple[dict[str, Any], httpx.Response]:
    """A tic-tac-toe episode fed ``BIG`` moves until one is refused: the episode as it
    was before that step, and the refusal."""
    [episode] = await create(api, config={"max_turns": 64}, example=0)
    for turn in range(64):
        before = (await api.get(f"/v1/episodes/{episode['id']}")).json()
        response = await step(api, episode["id"], BIG, turn)
        if response.status_code != 200:
            assert turn >= 1, "the first big move fits"
            return before, response
    raise AssertionError("never refused")


async def test_a_step_past_the_limit_is_413_and_changes_nothing(small: httpx.AsyncClient) -> None:
    before, refused = await grow(small)
    assert refused.status_code == 413
    error = error_of(refused)
    assert error["code"] == "payload_too_large"
    assert "WANDER_MAX_EPISODE_BYTES" in error["message"]
    assert error["details"]["max_episode_bytes"] == LIMIT
    assert error["details"]["episode_bytes"] > LIMIT
    after = (await small.get(f"/v1/episodes/{before['id']}")).json()
    assert after == before
    small_move = await step(small, before["id"], "<move>4</move>", before["turn"])
    assert small_move.status_code == 200, small_move.text  # the episode is not stuck


async def test_a_batch_item_past_the_limit_fails_alone(small: httpx.AsyncClient) -> None:
    before, _ = await grow(small)
    [other] = await create(small, example=1)
    items = [
        {"episode_id": before["id"], "action": BIG, "turn": before["turn"]},
        {"episode_id": other["id"], "action": "<move>4</move>", "turn": 0},
    ]
    response = await small.post("/v1/step", json={"steps": items})
    assert response.status_code == 200, response.text
    refused, applied = response.json()["results"]
    assert refused["error"]["code"] == "payload_too_large"
    assert refused["error"]["details"]["max_episode_bytes"] == LIMIT
    assert applied["turn"] == 1 and "error" not in applied
    assert (await small.get(f"/v1/episodes/{before['id']}")).json() == before


class Counting(httpx.AsyncBaseTransport):
    """Passes requests on and counts the steps sent."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner, self.steps = inner, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.steps += request.url.path.endswith("/step")
        return await self.inner.handle_async_request(request)


async def test_the_client_does_not_retry_a_413(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = limited
    before, _ = await grow(api)
    counting = Counting(httpx.ASGITransport(app=app))
    retry = Retry(attempts=5, backoff_seconds=0.01)
    async with AsyncWanderClient(str(api.base_url), transport=counting, retry=retry) as wander:
        with pytest.raises(PayloadTooLarge) as refused:
            await wander.step(before["id"], BIG, turn=before["turn"])
    assert refused.value.status == 413 and counting.steps == 1
