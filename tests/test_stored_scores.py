"""Scores are computed once, when a step is applied, and stored: reads run no
environment code (the RCE payloads used to run again on every GET)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import create, service, step
from wander.service.envs.tictactoe import TicTacToe
from wander.service.records import decode, encode
from wander.service.settings import Settings


async def test_reads_serve_the_stored_score(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    [episode] = await create(api, example=0)
    played = await step(api, episode["id"], "<think>centre</think><move>4</move>", 0)
    assert played.status_code == 200, played.text
    scored = (await api.get(f"/v1/episodes/{episode['id']}/score?partial=true")).json()

    def refuse(*args: Any) -> Any:
        raise AssertionError("a read ran the environment's score")

    monkeypatch.setattr(TicTacToe, "score", refuse)
    monkeypatch.setattr(TicTacToe, "public_state", refuse)
    again = await api.get(f"/v1/episodes/{episode['id']}/score?partial=true")
    record = await api.get(f"/v1/episodes/{episode['id']}")
    assert again.status_code == 200, again.text
    assert again.json() == scored
    assert record.status_code == 200, record.text
    assert record.json()["score"] == scored
    assert record.json()["state"]["board"] == played.json()["info"]["board"]


@pytest.mark.parametrize(
    ("env", "action"),
    [("tictactoe", "<think>centre</think><move>4</move>"),  # scored inline
     ("reverse_text", "<reversed_text>.</reversed_text>")],  # scored by a worker
)  # fmt: skip
async def test_an_episode_stored_without_its_score_is_scored_again(
    settings: Settings, env: str, action: str
) -> None:
    """An episode an older version stored (no ``score``, no ``info``: still in Redis during
    an upgrade) is read, aborted and stepped like any other."""
    async with service(settings) as (app, api):
        await _old_episodes_play_on(app, api, env, action)


async def _old_episodes_play_on(
    app: FastAPI, api: httpx.AsyncClient, env: str, action: str
) -> None:
    [first, second] = await create(api, env=env, example=0, n=2)
    expected = (await api.get(f"/v1/episodes/{first['id']}/score?partial=true")).json()
    store = app.state.engine.store
    for episode in (first, second):
        item = await store.load(episode["id"])
        old = {k: v for k, v in decode(item.data).items() if k not in ("score", "info")}
        assert await store.replace(episode["id"], item.version, encode(old), None)

    again = await api.get(f"/v1/episodes/{first['id']}/score?partial=true")
    assert again.status_code == 200, again.text
    assert again.json() == expected
    record = await api.get(f"/v1/episodes/{first['id']}")
    assert record.status_code == 200 and record.json()["state"] == first["info"]
    assert (await api.delete(f"/v1/episodes/{first['id']}")).status_code == 204
    played = await step(api, second["id"], action, 0)
    assert played.status_code == 200, played.text
