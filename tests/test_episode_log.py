"""An episode's messages live in a log beside its stored head, and a step appends to it
instead of rewriting the whole episode: the episode read back and its archived
record hold every message in order, a retried step appends nothing, and an episode
stored before the log (every message in its document) plays on after the upgrade."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.helpers import create, service, step
from wander.client.models import EpisodeRecord
from wander.service.archive import Archive, EpisodeFilter
from wander.service.records import decode, decode_log, encode
from wander.service.settings import Settings
from wander.service.store import EpisodeStore

INVALID = "<move>9</move>"
"""No such cell: the game goes on, until its ``max_turns``."""


async def archived(database_url: str, run: str, episode_id: str) -> EpisodeRecord:
    """The episode's archived record, once the archiver has written it."""
    archive = Archive(database_url)
    try:
        for _ in range(200):
            page = await asyncio.to_thread(
                archive.episodes, run, EpisodeFilter(), tenant=None, limit=100, offset=0
            )
            for record in page.episodes:
                if record.id == episode_id:
                    return record
            await asyncio.sleep(0.05)
    finally:
        archive.dispose()
    raise AssertionError(f"episode {episode_id} was not archived")


def contents(messages: list[dict[str, Any]]) -> list[str | None]:
    return [message["content"] for message in messages]


async def read(api: httpx.AsyncClient, episode_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/episodes/{episode_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record


async def test_every_message_reads_back_in_order_and_is_archived_as_read(
    settings: Settings,
) -> None:
    async with service(settings) as (_, api):
        [episode] = await create(api, run="log", example=0, config={"max_turns": 5})
        expected = contents(episode["observation"])
        for turn in range(5):
            action = f"{INVALID} try {turn}"
            first = await step(api, episode["id"], action, turn)
            again = await step(api, episode["id"], action, turn)  # a retry: nothing appended
            assert first.status_code == again.status_code == 200, first.text
            assert again.json() == first.json()
            expected += [action, *contents(first.json()["observation"])]
            assert contents((await read(api, episode["id"]))["messages"]) == expected
        record = await read(api, episode["id"])
        assert record["done"] and record["turn"] == 5
        stored = await archived(settings.database_url, "log", episode["id"])
        assert stored.model_dump(mode="json") == record


async def test_an_episode_stored_before_the_log_plays_on(settings: Settings) -> None:
    """The previous version kept every message in the episode's document, and no log:
    such an episode reads, steps (its messages move to the log), finishes and aborts with
    every message, on its first step or without one."""
    async with service(settings) as (app, api):
        [episode] = await create(api, run="old", example=0, config={"max_turns": 3})
        assert (await step(api, episode["id"], INVALID, 0)).status_code == 200
        store: EpisodeStore = app.state.engine.store
        played, aborted = await _as_stored_before_the_log(store, episode["id"], n=2)
        before = await read(api, played)
        assert before["messages"] == (await read(api, episode["id"]))["messages"]

        expected = contents(before["messages"])
        for turn in (1, 2):
            result = await step(api, played, INVALID, turn)
            assert result.status_code == 200, result.text
            expected += [INVALID, *contents(result.json()["observation"])]
        record = await read(api, played)
        assert record["done"] and contents(record["messages"]) == expected
        stored = await archived(settings.database_url, "old", played)
        assert stored.model_dump(mode="json") == record

        assert (await api.delete(f"/v1/episodes/{aborted}")).status_code == 204
        stored = await archived(settings.database_url, "old", aborted)
        assert (
            stored.status == "aborted"
            and stored.model_dump(mode="json")["messages"] == (before["messages"])
        )


async def _as_stored_before_the_log(store: EpisodeStore, episode_id: str, n: int) -> list[str]:
    """``n`` copies of the episode as the previous version stored it; their ids."""
    item = await store.load(episode_id, log=True)
    assert item is not None and item.log is not None
    head = decode(item.data)
    del head["messages_bytes"]
    ids = store.new_ids(n)
    copies = {id_: encode({**head, "id": id_, "messages": decode_log(item.log)}) for id_ in ids}
    await store.add(copies, head["env"])
    return ids
