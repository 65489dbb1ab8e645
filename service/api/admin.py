"""``/v1/admin``: what an operator does to the service. Today: the archive's dead letters,
which ``wander archive dead-letters list|retry|drop`` calls.

Routes, not direct store access from the command line, because the in-process store's
dead letters live inside the service's process, where only the service reaches them;
and one prefix, so that when keys and roles come, the admin role guards all of it in
one place. Kept small: list, move back to the backlog, delete.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from wander.client.models import (
    MAX_DEAD_LETTER_IDS,
    DeadLetterId,
    DeadLetterIds,
    DeadLetterInfo,
    DeadLettersChanged,
    DeadLetterSelection,
    DeadLettersPage,
)
from wander.service.api.deps import EngineDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archiver import record_label
from wander.service.store import DeadLetter, EpisodeStore

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)


@router.get("/dead-letters")
async def list_dead_letters(
    engine: EngineDep,
    limit: Annotated[int, Query(ge=1, le=MAX_DEAD_LETTER_IDS)] = 100,
    after: Annotated[
        DeadLetterId | None, Query(description="Those after this id (paging).")
    ] = None,
) -> DeadLettersPage:
    """Archive records the database refused, oldest first, with its error."""
    store = engine.store
    letters = await store.dead_letters(limit, after)
    # A record may be megabytes: reading its labels is not for the event loop.
    infos = await asyncio.to_thread(lambda: [_info(letter) for letter in letters])
    return DeadLettersPage(total=await store.dead_letter_count(), dead_letters=infos)


@router.post("/dead-letters/retry")
async def retry_dead_letters(
    selection: DeadLetterSelection, engine: EngineDep
) -> DeadLettersChanged:
    """Move dead letters back to the end of the archive backlog, to be written again
    (after fixing what the database refused them for)."""
    store = engine.store
    return _changed(selection, await store.retry_dead_letters(await _ids(selection, store)))


@router.post("/dead-letters/drop")
async def drop_dead_letters(
    selection: DeadLetterSelection, engine: EngineDep
) -> DeadLettersChanged:
    """Delete dead letters for good: those episodes will never be archived."""
    store = engine.store
    return _changed(selection, await store.drop_dead_letters(await _ids(selection, store)))


async def _ids(selection: DeadLetterSelection, store: EpisodeStore) -> list[str]:
    if isinstance(selection, DeadLetterIds):
        return selection.ids
    return await store.dead_letter_ids()


def _changed(selection: DeadLetterSelection, done: list[str]) -> DeadLettersChanged:
    asked = selection.ids if isinstance(selection, DeadLetterIds) else []
    acted = set(done)
    missing = [i for i in dict.fromkeys(asked) if i not in acted]
    return DeadLettersChanged(ids=done, missing=missing)


def _info(letter: DeadLetter) -> DeadLetterInfo:
    label = record_label(letter.data)
    return DeadLetterInfo(
        id=letter.id,
        episode_id=label.episode_id,
        env=label.env,
        run=label.run,
        error=letter.error,
        failed_at=datetime.fromtimestamp(letter.failed_at, UTC),
    )
