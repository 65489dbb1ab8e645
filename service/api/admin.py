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
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from wander.service.api.deps import EngineDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archiver import record_label
from wander.service.store import DeadLetter, EpisodeStore

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)

MAX_IDS = 1000
"""Dead letters named in one request; ``all`` has no limit."""

LetterId = Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z-]{1,64}$")]
"""A dead letter's id as the store hands it out (Redis: ``1732377600000-0``)."""


class DeadLetterInfo(BaseModel):
    """One dead letter: which episode, why the database refused it, and when."""

    id: str = Field(description="The dead letter's id, for retry and drop.")
    episode_id: str | None = Field(description="Null if the record is not even readable.")
    env: str | None
    run: str | None
    error: str
    failed_at: datetime


class DeadLettersPage(BaseModel):
    total: int = Field(description="Dead letters held now, on every page.")
    dead_letters: list[DeadLetterInfo] = Field(description="Oldest first.")


class DeadLetterSelection(BaseModel):
    """Which dead letters to act on: ``{"ids": [...]}`` or ``{"all": true}``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ids: list[LetterId] | None = Field(None, min_length=1, max_length=MAX_IDS)
    all: bool = Field(False, description="Every dead letter held when the request arrives.")

    @model_validator(mode="after")
    def _one_of(self) -> DeadLetterSelection:
        if (self.ids is None) != self.all:
            raise ValueError("give either `ids` or `all: true`, not both or neither")
        return self


class DeadLettersChanged(BaseModel):
    ids: list[str] = Field(description="The dead letters acted on.")
    missing: list[str] = Field(description="Ids asked for that the store does not hold.")


@router.get("/dead-letters")
async def list_dead_letters(
    engine: EngineDep,
    limit: Annotated[int, Query(ge=1, le=MAX_IDS)] = 100,
    after: Annotated[LetterId | None, Query(description="Those after this id (paging).")] = None,
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
    return await store.dead_letter_ids() if selection.ids is None else selection.ids


def _changed(selection: DeadLetterSelection, done: list[str]) -> DeadLettersChanged:
    acted = set(done)
    missing = [i for i in dict.fromkeys(selection.ids or ()) if i not in acted]
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
