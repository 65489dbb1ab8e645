"""A finished episode leaves the store once the archive holds it (``EpisodeStore.release``):
its messages at once, its document after ``WANDER_FINISHED_GRACE_SECONDS``, during which a
retried last step is still answered as the first time. Reads of the episode and of its
score are answered from the archive, the same record as before; another tenant's reads as
unknown. The in-process store holds at most ``WANDER_MEMORY_MAX_EPISODES`` episodes:
creating past it answers 503 ``store_full``, and nothing held is dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import redis

from tests.helpers import create, service, step
from wander.service.settings import Settings
from wander.service.store import EpisodeStore
from wander.service.store.redis import RedisStore

INVALID = "<move>9</move>"
"""No such cell: the game goes on until its ``max_turns``, the same way every time."""


async def finish(api: httpx.AsyncClient, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """An episode played to its end in two invalid moves: the episode, and its last step's
    result."""
    [episode] = await create(api, config={"max_turns": 2}, **body)
    assert (await step(api, episode["id"], INVALID, 0)).status_code == 200
    last = await step(api, episode["id"], INVALID, 1)
    assert last.status_code == 200 and last.json()["done"], last.text
    return episode, last.json()


async def released(store: EpisodeStore, episode_id: str) -> None:
    """Wait until the archiver has written the episode and the store has let its log go."""
    for _ in range(200):
        if await store.load(episode_id, log=True) is None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"episode {episode_id} was never released")


async def test_a_finished_episode_leaves_the_store_and_reads_from_the_archive(
    settings: Settings,
) -> None:
    async with service(settings) as (app, api):
        store: EpisodeStore = app.state.engine.store
        episode, last = await finish(api, run="released")
        record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
        score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
        await released(store, episode["id"])

        kept = await store.load(episode["id"])  # the document, for a retried last step
        assert kept is not None and kept.version == 3
        if isinstance(store, RedisStore):
            client = redis.Redis.from_url(str(settings.redis_url))
            assert not client.exists(store.log_key(episode["id"]))
            assert 0 < client.pttl(store.key(episode["id"])) <= 600_000
            client.close()
        again = await step(api, episode["id"], INVALID, 1)
        assert again.status_code == 200 and again.json() == last
        assert (await api.get(f"/v1/episodes/{episode['id']}")).json() == record
        assert (await api.get(f"/v1/episodes/{episode['id']}/score")).json() == score
        assert (await step(api, episode["id"], INVALID, 2)).json()["error"]["code"] == (
            "episode_done"
        )


async def test_past_the_grace_only_the_archive_knows_the_episode(settings: Settings) -> None:
    async with service(settings.model_copy(update={"finished_grace_seconds": 0.2})) as (app, api):
        store: EpisodeStore = app.state.engine.store
        episode, _ = await finish(api, run="graced")
        record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
        await released(store, episode["id"])
        await asyncio.sleep(0.3)
        assert await store.load(episode["id"]) is None
        retried = await step(api, episode["id"], INVALID, 1)
        assert retried.status_code == 404, retried.text
        assert (await api.get(f"/v1/episodes/{episode['id']}")).json() == record
        score = await api.get(f"/v1/episodes/{episode['id']}/score")
        assert score.status_code == 200 and score.json() == record["score"]
        assert (await api.get("/v1/episodes/ep_unknown")).status_code == 404


async def test_the_in_process_store_refuses_new_episodes_past_its_cap(
    migrated_sqlite_url: str,
) -> None:
    settings = Settings(redis_url=None, database_url=migrated_sqlite_url, memory_max_episodes=3)
    async with service(settings) as (app, api):
        [held, *_] = await create(api, n=2, config={"max_turns": 2})
        refused = await api.post("/v1/episodes", json={"env": "tictactoe", "n": 2})
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"]
        error = refused.json()["error"]
        assert error["code"] == "store_full"
        assert error["details"] == {"episodes": 2, "limit": 3}
        assert (await step(api, held["id"], INVALID, 0)).status_code == 200  # steps go on
        assert (await step(api, held["id"], INVALID, 1)).json()["done"]
        await released(app.state.engine.store, held["id"])
        assert len(await create(api, n=2)) == 2  # a finished, archived episode left room
