"""Who is calling: tenants, roles and the quotas that come with a key.

A key belongs to one tenant and has one role. Tenants never see each other's
episodes or runs; roles say which routes a key may call:

- ``agent``: create, step, score, read and abort its tenant's episodes;
- ``trainer``: an agent's rights, and its tenant's runs, summaries and exports;
- ``admin``: every tenant, ``/metrics`` and key management.

With no key configured the service is open: every caller is ``OPEN``, an admin of
no tenant. Nothing here knows about HTTP or storage: the API layer finds the
principal, the engine, the store and the archive are told which tenant to scope to.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Self

KEY_PREFIX = "wdr_"
"""What every generated key starts with, so that a leaked one is recognisable (scanners)."""
TENANT = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
"""A tenant's name: what keys, logs, metrics and Redis keys may safely carry."""


class Role(StrEnum):
    agent = "agent"
    trainer = "trainer"
    admin = "admin"

    def allows(self, needed: Role) -> bool:
        """Whether this role has the rights of ``needed`` (each role has those below it)."""
        return _RANK[self] >= _RANK[needed]


_RANK = {Role.agent: 0, Role.trainer: 1, Role.admin: 2}


@dataclass(frozen=True, slots=True)
class Quotas:
    """What one key may consume; None: no limit of that kind."""

    requests_per_second: float | None
    """Sustained request rate of the key (a token bucket shared by every replica)."""
    burst: int | None
    """Requests the key may send at once above its rate (the bucket's size)."""
    live_episodes: int | None
    """Episodes of the key's tenant created and neither finished nor expired."""
    metadata_bytes: int | None
    """Bytes of metadata (JSON) held by the tenant's live episodes, all copies counted."""
    group_size: int | None
    """Largest ``n`` of one create request."""
    batch_steps: int | None
    """Most steps in one batch request."""

    def updated(self, **overrides: float | int | None) -> Self:
        """These quotas with some replaced (a key's overrides of its role's defaults)."""
        return dataclasses.replace(self, **overrides)


DEFAULT_QUOTAS: dict[Role, Quotas] = {
    Role.agent: Quotas(
        requests_per_second=50, burst=100, live_episodes=1_000, metadata_bytes=16 << 20,
        group_size=16, batch_steps=64,
    ),
    Role.trainer: Quotas(
        requests_per_second=2_000, burst=4_000, live_episodes=100_000,
        metadata_bytes=256 << 20, group_size=256, batch_steps=1024,
    ),
    Role.admin: Quotas(
        requests_per_second=None, burst=None, live_episodes=None, metadata_bytes=None,
        group_size=None, batch_steps=None,
    ),
}  # fmt: skip
"""Each role's quotas unless its key overrides them. An agent is an outside model playing
a few episodes at a time; a trainer runs GRPO groups of up to 256 at thousands of steps a
second. The service's own limits (``WANDER_MAX_GROUP_SIZE``...) apply to everyone."""

UNLIMITED = DEFAULT_QUOTAS[Role.admin]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a request: the key's tenant, role and id, and its quotas."""

    tenant: str | None
    """The tenant new episodes belong to; None only for ``OPEN``."""
    role: Role
    key_id: str | None
    """The key's public id (never the key): what logs and metrics name."""
    quotas: Quotas = UNLIMITED

    @property
    def counted_tenant(self) -> str | None:
        """The tenant whose quotas this caller's new episodes count against: its own, but
        none for an admin, whose episodes are not limited and must not use up what its
        tenant's agents and trainers may hold."""
        return None if self.role is Role.admin else self.tenant

    @property
    def scope(self) -> str | None:
        """The only tenant whose episodes and runs this caller sees; None: every tenant."""
        return None if self.role is Role.admin else self.tenant


OPEN = Principal(tenant=None, role=Role.admin, key_id=None)
"""Every caller of a service with no key configured."""


def new_secret() -> str:
    """A new API key: 256 random bits, shown once and stored only as its ``key_hash``."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(secret: str) -> str:
    """What the archive stores of a key, and how a presented key is looked up.

    SHA-256, not a slow password hash: a generated key has 256 random bits, which no
    amount of hashing speed lets anyone guess, and a lookup must cost microseconds on
    every request. Keys from ``WANDER_API_KEYS`` are chosen by people and may be weak,
    but they are never stored: only compared in memory."""
    return hashlib.sha256(secret.encode()).hexdigest()
