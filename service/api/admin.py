"""``/v1/admin``: what an operator does to the service: the archive's dead letters, which
``wander archive dead-letters list|retry|drop`` calls, and the API keys.

Routes, not direct store access from the command line, because the in-process store's
dead letters live inside the service's process, where only the service reaches them;
and one prefix, so that when keys and roles come, the admin role guards all of it in
one place. Kept small: list, move back to the backlog, delete.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from wander.client.models import (
    MAX_DEAD_LETTER_IDS,
    CreatedKey,
    CreateKeyRequest,
    DeadLetterId,
    DeadLetterIds,
    DeadLetterInfo,
    DeadLettersChanged,
    DeadLetterSelection,
    DeadLettersPage,
    KeyInfo,
    KeysResponse,
    Text,
)
from wander.service.api.deps import ArchiveDep, EngineDep, KeyringDep
from wander.service.api.errors import ERROR_RESPONSES
from wander.service.archive import KeyBook, StoredKey
from wander.service.archiver import record_label
from wander.service.errors import KeyNotFound
from wander.service.store import DeadLetter, EpisodeStore
from wander.service.tenancy import Role

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


# API keys. Plain functions: FastAPI runs them in its thread pool, off the event loop,
# as the archive's synchronous database calls need.


@router.get("/keys")
def list_keys(
    archive: ArchiveDep,
    tenant: Annotated[Text | None, Query(max_length=64, description="Only this tenant's.")] = None,
    include_revoked: Annotated[bool, Query(description="Revoked keys too.")] = False,
) -> KeysResponse:
    """The API keys, oldest first: ids, tenants, roles, names and quota overrides,
    never the keys themselves (the service does not have them)."""
    keys = KeyBook(archive).list(tenant=tenant, include_revoked=include_revoked)
    return KeysResponse(keys=[_key_info(key) for key in keys])


@router.post("/keys", status_code=status.HTTP_201_CREATED)
def create_key(request: CreateKeyRequest, archive: ArchiveDep) -> CreatedKey:
    """A new API key for a tenant, with a role and optional overrides of the role's
    quotas. The answer holds the key itself: the only time it is shown."""
    quotas = None if request.quotas is None else request.quotas.model_dump(exclude_unset=True)
    key, secret = KeyBook(archive).create(
        request.tenant, Role(request.role), name=request.name, quotas=quotas
    )
    return CreatedKey(**_key_info(key).model_dump(), key=secret)


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_key(
    key_id: Annotated[Text, Path(max_length=200, description="The key's id (`key_…`).")],
    archive: ArchiveDep,
    keyring: KeyringDep,
) -> Response:
    """Revoke a key: refused at once by this replica, and by the others within
    ``WANDER_KEY_CACHE_SECONDS``. Revoking a revoked key changes nothing."""
    if KeyBook(archive).revoke(key_id) is None:
        raise KeyNotFound(f"no API key has the id {key_id!r}")
    keyring.forget(key_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _key_info(key: StoredKey) -> KeyInfo:
    return KeyInfo(
        id=key.id,
        tenant=key.tenant,
        role=key.role.value,
        name=key.name,
        quotas=key.quotas,
        created_at=key.created_at,
        revoked_at=key.revoked_at,
    )
