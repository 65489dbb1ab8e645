"""Keys listed in ``WANDER_API_KEYS``: comma-separated ``tenant:role:key`` entries.

For deployments that want a few fixed keys without managing them in the archive.
Each entry becomes a principal with its role's default quotas; its id, what logs
and metrics name, is ``env-<tenant>-<role>-<n>`` (its position in the list), so
nothing derived from the key itself is ever shown. Any entry that cannot be
applied is an error naming it by position, never by its text (it holds a key).
"""

from __future__ import annotations

from dataclasses import dataclass

from wander.service.tenancy import DEFAULT_QUOTAS, TENANT, Principal, Role, key_hash


@dataclass(frozen=True, slots=True)
class ConfiguredKey:
    """One entry of ``WANDER_API_KEYS``: who it is, and the hash it is looked up by."""

    principal: Principal
    hash: str


def parse_api_keys(text: str) -> list[ConfiguredKey]:
    """The entries of ``text``; ``ValueError`` with what is wrong with which entry."""
    keys: list[ConfiguredKey] = []
    seen: set[str] = set()
    entries = [entry.strip() for entry in text.split(",")]
    for position, entry in enumerate(entries, 1):
        if not entry and len(entries) == 1:
            break  # an empty setting: no keys
        where = f"WANDER_API_KEYS entry {position}"
        tenant, role, secret = [*entry.split(":", 2), "", ""][:3]
        if not secret:
            raise ValueError(f"{where} is not `tenant:role:key`")
        if not TENANT.fullmatch(tenant):
            raise ValueError(
                f"{where}: the tenant must be 1-63 lowercase letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        if role not in Role.__members__:
            raise ValueError(f"{where}: the role must be one of {', '.join(Role)}")
        if secret != secret.strip() or any(c.isspace() for c in secret):
            raise ValueError(f"{where}: the key holds white space")
        hashed = key_hash(secret)
        if hashed in seen:
            raise ValueError(f"{where} repeats the key of an earlier entry")
        seen.add(hashed)
        principal = Principal(
            tenant=tenant,
            role=Role(role),
            key_id=f"env-{tenant}-{role}-{position}",
            quotas=DEFAULT_QUOTAS[Role(role)],
        )
        keys.append(ConfiguredKey(principal, hashed))
    return keys
