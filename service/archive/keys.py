"""API keys, kept in the archive database: ``wander keys`` and ``/v1/admin/keys`` write
them, the service looks a presented key up by its hash.

A key is shown once, when it is created; the table holds its SHA-256 (``key_hash``)
and a public id (``key_...``) that logs, metrics and revoking name. Revoking keeps the
row: a revoked key is still found (and refused), and ``exists`` still counts it, so
that revoking the last key never turns a service with keys into an open one.
"""

from __future__ import annotations

import builtins
import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, get_type_hints

from sqlalchemy import Row, insert, select, update

from wander.service.archive.database import Archive, utc
from wander.service.archive.tables import ApiKey
from wander.service.errors import InvalidInput
from wander.service.tenancy import (
    DEFAULT_QUOTAS,
    TENANT,
    Quotas,
    Role,
    key_hash,
    new_secret,
)

KEY_ID_PREFIX = "key_"
QUOTA_LIMIT = 2**63
"""Quotas are below this: what the stores' counters (signed 64-bit) can compare against."""
NAME_CHARS = 200
"""The longest name (its column's length)."""

_QUOTA_TYPES = get_type_hints(Quotas)
WHOLE_QUOTAS = frozenset(name for name, kind in _QUOTA_TYPES.items() if kind == int | None)
"""The quotas that count things (all but the request rate): whole numbers only."""


@dataclass(frozen=True, slots=True)
class StoredKey:
    """An API key as the archive holds it: everything but the key itself."""

    id: str
    """The public id, ``key_`` and 12 random characters: safe to log, never a credential."""
    tenant: str
    role: Role
    name: str | None
    quotas: dict[str, float | int | None]
    """The overrides of the role's default quotas (empty: the defaults)."""
    created_at: datetime
    revoked_at: datetime | None
    """When the key was revoked; None while it works."""

    @property
    def effective_quotas(self) -> Quotas:
        """What the key may consume: its role's defaults with its overrides."""
        return DEFAULT_QUOTAS[self.role].updated(**self.quotas)


class KeyBook:
    """The API keys of the archive at ``archive`` (its engine, its error mapping: every
    method raises ``DatabaseUnavailable`` when the database cannot be reached)."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    def create(
        self,
        tenant: str,
        role: Role,
        *,
        name: str | None = None,
        quotas: Mapping[str, float | int | None] | None = None,
    ) -> tuple[StoredKey, str]:
        """A new key of ``tenant`` with ``role``: its record and the key itself, which is
        not stored anywhere (only its hash), so this is the one chance to hand it over.
        ``quotas`` override the role's defaults (``DEFAULT_QUOTAS``); None lifts a limit.

        ``InvalidInput`` (naming the field) for a tenant that is not a tenant's name
        (``TENANT``), an empty or overlong name, a quota that
        ``Quotas`` does not have, or one that is not a non-negative number (a whole one
        for the quotas that count) or None."""
        key = StoredKey(
            id=KEY_ID_PREFIX + secrets.token_urlsafe(9),
            tenant=_checked_tenant(tenant),
            role=Role(role),
            name=_checked_name(name),
            quotas=_checked_quotas(quotas or {}),
            created_at=datetime.now(UTC),
            revoked_at=None,
        )
        secret = new_secret()
        row = dataclasses.asdict(key) | {"hash": key_hash(secret), "quotas": key.quotas or None}
        with self.archive.transaction() as connection:
            connection.execute(insert(ApiKey), [row])
        return key, secret

    def list(
        self, *, tenant: str | None = None, include_revoked: bool = False
    ) -> builtins.list[StoredKey]:
        """The keys of ``tenant`` (None: of every tenant), oldest first; revoked ones only
        with ``include_revoked``."""
        query = select(*_COLUMNS).order_by(ApiKey.created_at, ApiKey.id)
        if tenant is not None:
            query = query.where(ApiKey.tenant == tenant)
        if not include_revoked:
            query = query.where(ApiKey.revoked_at.is_(None))
        with self.archive.transaction() as connection:
            return [_stored(row) for row in connection.execute(query)]

    def revoke(self, key_id: str) -> StoredKey | None:
        """Revoke the key ``key_id`` from now on; one revoked already keeps the time it
        was revoked at. The key as it now is, or None when there is no such key."""
        revoke = (
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
        )
        with self.archive.transaction() as connection:
            connection.execute(revoke)
            row = connection.execute(select(*_COLUMNS).where(ApiKey.id == key_id)).first()
        return None if row is None else _stored(row)

    def find(self, secret_hash: str) -> StoredKey | None:
        """The key whose ``key_hash`` is ``secret_hash``, revoked or not; None if none."""
        query = select(*_COLUMNS).where(ApiKey.hash == secret_hash)
        with self.archive.transaction() as connection:
            row = connection.execute(query).first()
        return None if row is None else _stored(row)


_COLUMNS = [column for column in ApiKey.__table__.c if column.name != "hash"]
"""What a ``StoredKey`` is read from: never the hash, which nothing outside needs."""


def _stored(row: Row[Any]) -> StoredKey:
    return StoredKey(
        id=row.id,
        tenant=row.tenant,
        role=Role(row.role),
        name=row.name,
        quotas=dict(row.quotas or {}),
        created_at=utc(row.created_at),  # type: ignore[arg-type]
        revoked_at=utc(row.revoked_at),
    )


def _invalid(field: list[str], message: str) -> InvalidInput:
    return InvalidInput(message, [{"loc": field, "msg": message, "type": "value_error"}])


def _checked_tenant(tenant: str) -> str:
    if not TENANT.fullmatch(tenant):
        raise _invalid(
            ["tenant"],
            f"{tenant!r} is not a tenant's name: 1 to 63 lower-case letters, digits and "
            "'_.-', starting with a letter or a digit",
        )
    return tenant


def _checked_name(name: str | None) -> str | None:
    if name is None or (0 < len(name) <= NAME_CHARS and "\0" not in name):
        return name
    raise _invalid(["name"], f"a key's name has 1 to {NAME_CHARS} characters, none of them NUL")


def _checked_quotas(quotas: Mapping[str, object]) -> dict[str, float | int | None]:
    """``quotas`` as stored, counts as integers; ``InvalidInput`` for the first one that
    ``Quotas`` has not, or whose value is neither None nor a non-negative number below
    2**63 (a whole one for the quotas that count)."""
    checked: dict[str, float | int | None] = {}
    for name, value in quotas.items():
        if name not in _QUOTA_TYPES:
            known = ", ".join(_QUOTA_TYPES)
            raise _invalid(["quotas", name], f"{name!r} is not a quota: one of {known}")
        checked[name] = None if value is None else _checked_quota(name, value)
    return checked


def _checked_quota(name: str, value: object) -> float | int:
    whole = name in WHOLE_QUOTAS
    # NaN and the infinities fail the range test; booleans are not numbers here.
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < QUOTA_LIMIT:
        if not whole:
            return float(value)
        if float(value).is_integer():
            return int(value)
    kind = "a whole number" if whole else "a number"
    raise _invalid(
        ["quotas", name],
        f"quota {name} must be {kind} from 0 to below 2**63, or null for no limit; not {value!r}",
    )
