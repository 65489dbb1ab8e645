"""API keys in the archive database (SQLite and PostgreSQL): ``KeyBook``, the admin
routes ``/v1/admin/keys`` and ``wander keys``. A key is shown once and stored only as
its hash; revoking keeps the row; bad input is a clear error, never a traceback."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
import sqlalchemy
from typer.testing import CliRunner

from tests.helpers import error_of, service
from wander.cli import app
from wander.client.models import TENANT_PATTERN, KeyInfo, KeyRole, QuotaOverrides
from wander.service.archive import Archive, KeyBook, StoredKey
from wander.service.archive.migrations import upgrade
from wander.service.errors import DatabaseUnavailable, InvalidInput
from wander.service.keyring import Keyring
from wander.service.settings import Settings
from wander.service.tenancy import DEFAULT_QUOTAS, TENANT, Quotas, Role, key_hash
from wander.testing import free_port

KEY_ID = re.compile(r"key_[A-Za-z0-9_-]{12}")


@pytest.fixture
def archive(database_url: str) -> Iterator[Archive]:
    archive = Archive(database_url)
    yield archive
    archive.dispose()


@pytest.fixture
def book(archive: Archive) -> KeyBook:
    return KeyBook(archive)


def stored_rows(archive: Archive) -> list[dict[str, Any]]:
    with archive.engine.connect() as connection:
        rows = connection.execute(sqlalchemy.text("SELECT * FROM api_keys"))
        return [dict(row._mapping) for row in rows]


# The wire models and the service's vocabulary say the same thing.


def test_the_wire_models_name_the_services_roles_quotas_and_tenants() -> None:
    assert set(get_args(KeyRole)) == set(Role)
    assert list(QuotaOverrides.model_fields) == [f.name for f in dataclasses.fields(Quotas)]
    assert f"^{TENANT.pattern}$" == TENANT_PATTERN


# KeyBook.


def test_a_key_is_found_by_its_hash_and_never_stored(book: KeyBook, archive: Archive) -> None:
    key, secret = book.create(
        "acme", Role.trainer, name="ci", quotas={"burst": 10, "requests_per_second": None}
    )
    assert KEY_ID.fullmatch(key.id) and secret.startswith("wdr_")
    assert (key.tenant, key.role, key.name, key.revoked_at) == ("acme", Role.trainer, "ci", None)
    assert key.quotas == {"burst": 10, "requests_per_second": None}
    assert book.find(key_hash(secret)) == key
    assert book.find(key_hash(secret + "x")) is None
    [row] = stored_rows(archive)
    assert row["hash"] == key_hash(secret)
    assert secret not in repr(row)


async def test_a_service_requiring_keys_warns_only_when_none_exists(
    book: KeyBook, caplog: pytest.LogCaptureFixture
) -> None:
    """Keys required and none in WANDER_API_KEYS: a warning that no request can succeed,
    unless the archive holds an active key (made with `wander keys create`)."""
    keyring = Keyring(Settings(auth="keys"), book)
    with caplog.at_level(logging.WARNING, logger="wander.service.keyring"):
        await keyring.check_start()
    assert "every request will be refused until one is created" in caplog.text
    caplog.clear()
    book.create("lab", Role.trainer)
    with caplog.at_level(logging.WARNING, logger="wander.service.keyring"):
        await keyring.check_start()
    assert caplog.text == ""


def test_a_keys_quotas_are_its_roles_with_its_overrides(book: KeyBook) -> None:
    key, _ = book.create("acme", Role.agent, quotas={"burst": 7.0, "requests_per_second": None})
    assert key.effective_quotas == dataclasses.replace(
        DEFAULT_QUOTAS[Role.agent], burst=7, requests_per_second=None
    )
    assert type(key.quotas["burst"]) is int  # a whole float is the count it means
    [listed] = book.list()
    assert listed.quotas == {"burst": 7, "requests_per_second": None}
    plain, _ = book.create("acme", Role.admin)
    assert plain.quotas == {} and plain.effective_quotas == DEFAULT_QUOTAS[Role.admin]


def test_keys_are_listed_oldest_first_by_tenant_and_revocation(book: KeyBook) -> None:
    first, _ = book.create("acme", Role.agent)
    second, _ = book.create("globex", Role.admin)
    third, _ = book.create("acme", Role.trainer)
    revoked = book.revoke(second.id)
    assert revoked is not None and revoked.revoked_at is not None
    assert book.list() == [first, third]
    assert book.list(include_revoked=True) == [first, revoked, third]
    assert book.list(tenant="acme") == [first, third]
    assert book.list(tenant="globex") == []
    assert book.list(tenant="globex", include_revoked=True) == [revoked]


def test_revoking_is_idempotent_and_keeps_the_key(book: KeyBook) -> None:
    key, secret = book.create("acme", Role.agent)
    revoked = book.revoke(key.id)
    assert revoked is not None and revoked.revoked_at is not None
    assert revoked == dataclasses.replace(key, revoked_at=revoked.revoked_at)
    assert revoked.revoked_at >= key.created_at
    assert book.revoke(key.id) == revoked  # the first revocation's time stays
    assert book.find(key_hash(secret)) == revoked  # found, and seen revoked
    assert book.revoke("key_nosuchkey0") is None


BAD_KEYS: list[tuple[dict[str, Any], list[str]]] = [
    ({"tenant": "Acme"}, ["tenant"]),
    ({"tenant": ""}, ["tenant"]),
    ({"tenant": "-acme"}, ["tenant"]),
    ({"tenant": "a" * 64}, ["tenant"]),
    ({"tenant": "acme\n"}, ["tenant"]),
    ({"name": ""}, ["name"]),
    ({"name": "x" * 201}, ["name"]),
    ({"name": "a\0b"}, ["name"]),
    ({"quotas": {"speed": 1}}, ["quotas", "speed"]),
    ({"quotas": {"burst": -1}}, ["quotas", "burst"]),
    ({"quotas": {"burst": 1.5}}, ["quotas", "burst"]),
    ({"quotas": {"burst": True}}, ["quotas", "burst"]),
    ({"quotas": {"burst": "10"}}, ["quotas", "burst"]),
    ({"quotas": {"live_episodes": 2**63}}, ["quotas", "live_episodes"]),
    ({"quotas": {"requests_per_second": float("nan")}}, ["quotas", "requests_per_second"]),
    ({"quotas": {"requests_per_second": float("inf")}}, ["quotas", "requests_per_second"]),
    ({"quotas": {"requests_per_second": -0.5}}, ["quotas", "requests_per_second"]),
]


@pytest.mark.parametrize(("change", "loc"), BAD_KEYS)
def test_bad_keys_are_invalid_input_and_not_stored(
    sqlite_url: str, change: dict[str, Any], loc: list[str]
) -> None:
    upgrade(sqlite_url)
    archive = Archive(sqlite_url)
    book = KeyBook(archive)
    arguments = {"tenant": "acme", "role": Role.agent} | change
    with pytest.raises(InvalidInput) as raised:
        book.create(**arguments)
    archive.dispose()
    assert raised.value.code == "validation_error"
    assert raised.value.details == [
        {"loc": loc, "msg": raised.value.message, "type": "value_error"}
    ]
    assert book.list(include_revoked=True) == []


def test_an_unreachable_database_is_database_unavailable() -> None:
    archive = Archive(f"postgresql+psycopg://127.0.0.1:{free_port()}/none")
    book = KeyBook(archive)
    for call in [book.list, lambda: book.create("acme", Role.agent),
                 lambda: book.revoke("key_x"), lambda: book.find("0" * 64)]:  # fmt: skip
        with pytest.raises(DatabaseUnavailable):
            call()
    archive.dispose()


# The admin routes.


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The service (in-process store) over a migrated archive on SQLite and PostgreSQL."""
    async with service(Settings(redis_url=None, database_url=database_url)) as (_, client):
        yield client


async def test_admin_routes_create_list_and_revoke_keys(
    api: httpx.AsyncClient, database_url: str
) -> None:
    body = {"tenant": "acme", "role": "trainer", "name": "ci",
            "quotas": {"burst": 10, "requests_per_second": None}}  # fmt: skip
    created = await api.post("/v1/admin/keys", json=body)
    assert created.status_code == 201, created.text
    key = created.json()
    assert set(key) == set(KeyInfo.model_fields) | {"key"}
    assert KEY_ID.fullmatch(key["id"]) and key["key"].startswith("wdr_")
    assert (key["tenant"], key["role"], key["name"], key["revoked_at"]) == (
        "acme", "trainer", "ci", None,
    )  # fmt: skip
    assert key["quotas"] == {"burst": 10, "requests_per_second": None}  # only those given
    archive = Archive(database_url)
    found = KeyBook(archive).find(key_hash(key["key"]))
    archive.dispose()
    assert found is not None and found.id == key["id"]

    other = (await api.post("/v1/admin/keys", json={"tenant": "globex", "role": "agent"})).json()
    listing = (await api.get("/v1/admin/keys")).json()
    assert [k["id"] for k in listing["keys"]] == [key["id"], other["id"]]
    assert all(set(k) == set(KeyInfo.model_fields) for k in listing["keys"])  # no key, no hash
    assert key["key"] not in str(listing) and key_hash(key["key"]) not in str(listing)
    mine = (await api.get("/v1/admin/keys", params={"tenant": "globex"})).json()
    assert [k["id"] for k in mine["keys"]] == [other["id"]]

    for _ in range(2):  # revoking twice is the same
        revoked = await api.delete(f"/v1/admin/keys/{other['id']}")
        assert revoked.status_code == 204 and revoked.content == b""
    listing = (await api.get("/v1/admin/keys")).json()
    assert [k["id"] for k in listing["keys"]] == [key["id"]]
    everything = (await api.get("/v1/admin/keys", params={"include_revoked": True})).json()
    [_, gone] = everything["keys"]
    assert gone["id"] == other["id"] and gone["revoked_at"] is not None


async def test_revoking_an_unknown_key_is_key_not_found(api: httpx.AsyncClient) -> None:
    response = await api.delete("/v1/admin/keys/key_nosuchkey0")
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "key_not_found" and "'key_nosuchkey0'" in error["message"]


BAD_REQUESTS: list[tuple[dict[str, Any], list[Any]]] = [
    ({"tenant": "Acme"}, ["body", "tenant"]),
    ({"tenant": "a" * 64}, ["body", "tenant"]),
    ({"role": "boss"}, ["body", "role"]),
    ({"name": ""}, ["body", "name"]),
    ({"name": "a\0b"}, ["body", "name"]),
    ({"quotas": {"speed": 1}}, ["body", "quotas", "speed"]),
    ({"quotas": {"burst": -1}}, ["body", "quotas", "burst"]),
    ({"quotas": {"burst": 1.5}}, ["body", "quotas", "burst"]),
    ({"quotas": {"burst": "10"}}, ["body", "quotas", "burst"]),
    ({"quotas": {"burst": True}}, ["body", "quotas", "burst"]),
    ({"quotas": {"group_size": 2**63}}, ["body", "quotas", "group_size"]),
    ({"quotas": {"requests_per_second": -1}}, ["body", "quotas", "requests_per_second"]),
    ({"secret": "mine"}, ["body", "secret"]),
]


async def test_bad_key_requests_are_validation_errors(api: httpx.AsyncClient) -> None:
    for change, loc in BAD_REQUESTS:
        response = await api.post(
            "/v1/admin/keys", json={"tenant": "acme", "role": "agent"} | change
        )
        assert response.status_code == 422, change
        error = error_of(response)
        assert error["code"] == "validation_error", change
        assert [detail["loc"] for detail in error["details"]] == [loc], change
    listing = await api.get("/v1/admin/keys", params={"include_revoked": True})
    assert listing.json() == {"keys": []}


# wander keys.

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def keys_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/keys.db"
    upgrade(url)
    return url


def keys(database_url: str, *args: str) -> Any:
    return runner.invoke(app, ["keys", *args, "--database-url", database_url])


def stored(database_url: str) -> list[StoredKey]:
    archive = Archive(database_url)
    try:
        return KeyBook(archive).list(include_revoked=True)
    finally:
        archive.dispose()


def test_create_shows_the_key_once_and_list_never(keys_db: str) -> None:
    created = keys(keys_db, "create", "--tenant", "acme", "--role", "trainer", "--name",
                   "ci bot", "--burst", "10", "--requests-per-second", "unlimited")  # fmt: skip
    assert created.exit_code == 0, created.output
    [key] = stored(keys_db)
    [secret] = re.findall(r"wdr_[A-Za-z0-9_-]+", created.output)
    assert key.id in created.output and "acme" in created.output and "trainer" in created.output
    assert "shown this once" in created.output
    assert "start it with WANDER_AUTH=keys" in created.stderr  # it takes none as it stands
    assert (key.name, key.quotas) == ("ci bot", {"burst": 10, "requests_per_second": None})
    archive = Archive(keys_db)
    assert KeyBook(archive).find(key_hash(secret)) == key
    archive.dispose()

    listed = keys(keys_db, "list")
    assert listed.exit_code == 0, listed.output
    assert key.id in listed.output and "ci bot" in listed.output
    assert "burst=10" in listed.output and "requests_per_second=unlimited" in listed.output
    assert secret not in listed.output and key_hash(secret) not in listed.output


def test_quiet_create_prints_the_key_alone(keys_db: str) -> None:
    created = keys(keys_db, "create", "--tenant", "acme", "--role", "agent", "--quiet")
    assert created.exit_code == 0, created.output
    [key] = stored(keys_db)
    assert re.fullmatch(r"wdr_[A-Za-z0-9_-]{43}\n", created.stdout)
    archive = Archive(keys_db)
    assert KeyBook(archive).find(key_hash(created.stdout.strip())) == key
    archive.dispose()


def test_revoke_then_list(keys_db: str) -> None:
    for tenant in ["acme", "globex"]:
        assert keys(keys_db, "create", "--tenant", tenant, "--role", "agent").exit_code == 0
    acme, globex = stored(keys_db)
    revoked = keys(keys_db, "revoke", acme.id)
    assert revoked.exit_code == 0, revoked.output
    assert f"Key {acme.id} (tenant acme, role agent) is revoked since" in revoked.output
    assert keys(keys_db, "revoke", acme.id).output == revoked.output  # idempotent
    working = keys(keys_db, "list")
    assert globex.id in working.output and acme.id not in working.output
    every = keys(keys_db, "list", "--all", "--tenant", "acme")
    [row] = [line for line in every.output.splitlines() if acme.id in line]
    [revoked_at] = [k.revoked_at for k in stored(keys_db) if k.id == acme.id]
    assert revoked_at is not None and revoked_at.strftime("%Y-%m-%d %H:%M:%S") in row
    assert globex.id not in every.output
    assert (
        keys(keys_db, "list", "--tenant", "initech").output
        == "No working keys of tenant initech.\n"
    )


def test_revoking_an_unknown_key_fails_clearly(keys_db: str) -> None:
    result = keys(keys_db, "revoke", "key_nosuchkey0")
    assert result.exit_code == 1
    assert result.output.startswith("Error: no API key has the id key_nosuchkey0")


@pytest.mark.parametrize(
    ("args", "option", "says"),
    [
        (["--tenant", "Acme", "--role", "agent"], "--tenant", "is not a tenant's name"),
        (["--tenant", "acme", "--role", "boss"], "--role", "is not a role"),
        (["--tenant", "acme", "--role", "agent", "--burst", "-1"], "--burst", "whole number"),
        (["--tenant", "acme", "--role", "agent", "--batch-steps", "2.5"], "--batch-steps",
         "whole number"),
        (["--tenant", "acme", "--role", "agent", "--group-size", "lots"], "--group-size",
         "neither a number nor 'unlimited'"),
        (["--tenant", "acme", "--role", "agent", "--name", ""], "--name", "1 to 200 characters"),
    ],
)  # fmt: skip
def test_bad_input_is_a_usage_error(keys_db: str, args: list[str], option: str, says: str) -> None:
    result = keys(keys_db, "create", *args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {option}" in result.output and says in result.output
    assert "Traceback" not in result.output
    assert stored(keys_db) == []


def test_an_unmigrated_or_missing_database_is_one_clear_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    upgrade(url, "0001")
    for command in [["list"], ["create", "--tenant", "acme", "--role", "admin"], ["revoke", "k"]]:
        result = keys(url, *command)
        assert result.exit_code == 1, result.output
        assert result.output == (
            "Error: the archive database is at revision 0001, not 0002: run `wander db upgrade`\n"
        )
    missing = keys(f"sqlite:///{tmp_path}/none.db", "list")
    assert missing.exit_code == 1 and "`wander db upgrade`" in missing.output
    assert not (tmp_path / "none.db").exists()


def test_an_unreachable_database_is_one_line_without_its_password() -> None:
    url = f"postgresql+psycopg://wander:s3cret@127.0.0.1:{free_port()}/archive"
    result = keys(url, "list")
    assert result.exit_code == 1
    assert result.output.startswith("Error: the archive database is unreachable: ")
    assert len(result.output.splitlines()) == 1 and "s3cret" not in result.output
