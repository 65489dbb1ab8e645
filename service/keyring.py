"""Who a presented key belongs to: ``WANDER_API_KEYS`` first, then the archive's keys.

A lookup must cost microseconds on every request, so what a replica read of a key
in the archive is remembered for ``WANDER_KEY_CACHE_SECONDS``: a key revoked on
another replica (or with ``wander keys revoke``) is refused within that long, and at
once on the replica that revoked it through the admin API. While the archive cannot
be reached, a key already seen keeps working (a trainer keeps training through a
database outage); a key never seen gets 503 ``database_unavailable``, never a 401
that the database would contradict a moment later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cachetools import LRUCache

from wander.service.errors import DatabaseUnavailable, Unauthorized
from wander.service.keys import parse_api_keys
from wander.service.settings import Settings
from wander.service.tenancy import Principal, Quotas, Role, key_hash

log = logging.getLogger(__name__)

CACHED_KEYS = 10_000
"""Keys remembered per replica (unknown ones too: a client retrying a wrong key costs
the database one query per ``key_cache_seconds``, not one per request)."""
LOOKUPS = 4
"""Archive lookups in flight at once: a flood of random keys waits for these rather
than taking every database connection."""


class KeyRecord(Protocol):
    """A key as the archive keeps it (``archive.KeyBook``)."""

    @property
    def id(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def role(self) -> Role: ...
    @property
    def revoked_at(self) -> datetime | None: ...
    @property
    def effective_quotas(self) -> Quotas: ...


class KeySource(Protocol):
    """The archive's keys (``archive.KeyBook``): synchronous, run in a thread."""

    def find(self, secret_hash: str) -> KeyRecord | None: ...
    def list(
        self, *, tenant: str | None = None, include_revoked: bool = False
    ) -> list[KeyRecord]: ...


class StartRefused(RuntimeError):
    """The service must not start with its keys as configured (the message says why)."""


def open_with_active_keys(source: KeySource) -> str | None:
    """Why an open service must not start, or None: the archive holds active keys, which
    someone created to be required, and ignoring them silently would open what they meant
    to close. Raises ``DatabaseUnavailable`` when the archive cannot be read."""
    active = source.list()
    if not active:
        return None
    return (
        f"the archive holds {len(active)} active API key(s), but the service is open: "
        "set WANDER_AUTH=keys to require them (or revoke them with `wander keys revoke`)"
    )


@dataclass(frozen=True, slots=True)
class _Seen:
    principal: Principal | None
    """None: unknown or revoked."""
    at: float


class Keyring:
    """Resolves ``Authorization`` secrets to principals."""

    def __init__(self, settings: Settings, source: KeySource) -> None:
        self.required = settings.requires_keys
        secret = settings.api_keys.get_secret_value() if settings.api_keys else ""
        self._configured = {key.hash: key.principal for key in parse_api_keys(secret)}
        self._source = source
        self._ttl = settings.key_cache_seconds
        self._seen: LRUCache[str, _Seen] = LRUCache(CACHED_KEYS)
        self._lookups = asyncio.Semaphore(LOOKUPS)

    async def principal(self, secret: str | None) -> Principal:
        """The principal of ``secret``; ``Unauthorized`` for no key, an unknown or a revoked
        one (the same answer for all three)."""
        if not secret:
            raise Unauthorized("this service needs an API key: Authorization: Bearer <key>")
        hashed = key_hash(secret)
        principal = self._configured.get(hashed)
        if principal is None:
            principal = await self._stored(hashed)
        if principal is None:
            raise Unauthorized("the API key is unknown or revoked")
        return principal

    def forget(self, key_id: str) -> None:
        """Stop trusting what was read of ``key_id`` (it was just revoked here)."""
        for hashed, seen in list(self._seen.items()):
            if seen.principal is not None and seen.principal.key_id == key_id:
                del self._seen[hashed]

    async def check_start(self) -> None:
        """Raise ``StartRefused`` for an open service over an archive with active keys
        (``open_with_active_keys``); an archive that cannot be reached now is only warned
        about. ``wander serve`` makes the same check before it starts the server, so that
        its refusal is one line rather than a traceback."""
        if self.required:
            if not self._configured:
                await self._warn_if_keyless()
            return
        try:
            refusal = await asyncio.to_thread(open_with_active_keys, self._source)
        except DatabaseUnavailable as exc:
            log.warning("could not check the archive for API keys: %s", exc)
            return
        if refusal:
            raise StartRefused(refusal)

    async def _warn_if_keyless(self) -> None:
        """Keys are required and none is listed in the settings: say so only when the
        archive holds none either (no request can succeed until one is created)."""
        try:
            active = await asyncio.to_thread(self._source.list)
        except DatabaseUnavailable as exc:
            log.warning("could not check the archive for API keys: %s", exc)
            return
        if not active:
            log.warning(
                "WANDER_AUTH=keys and no key exists (none in WANDER_API_KEYS, none active in "
                "the archive): every request will be refused until one is created with "
                "`wander keys create`"
            )

    async def _stored(self, hashed: str) -> Principal | None:
        seen = self._seen.get(hashed)
        if seen is not None and time.monotonic() - seen.at < self._ttl:
            return seen.principal
        async with self._lookups:
            try:
                key = await asyncio.to_thread(self._source.find, hashed)
            except DatabaseUnavailable:
                if seen is not None and seen.principal is not None:
                    return seen.principal  # the archive is down: trust what was read of it
                raise
        principal = None
        if key is not None and key.revoked_at is None:
            principal = Principal(key.tenant, key.role, key.id, key.effective_quotas)
        self._seen[hashed] = _Seen(principal, time.monotonic())
        return principal
