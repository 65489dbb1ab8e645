"""Scores are computed once, when a step is applied, and stored: reads run no
environment code (issue #20: the RCE payloads ran again on every GET)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import create, step
from wander.service.envs.tictactoe import TicTacToe


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
