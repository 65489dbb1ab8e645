"""Alembic migrations on SQLite and PostgreSQL: up from empty, down to nothing, no drift."""

from __future__ import annotations

import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tests.records import tictactoe_record
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.connect import make_engine
from wander.service.archive.database import _row
from wander.service.archive.migrations import current_revision, downgrade, head_revision, upgrade
from wander.service.archive.tables import ArchivedEpisode, Base

REAL_MIGRATIONS = True
"""``database_url`` is migrated by Alembic here, not copied from the session's template."""

EPISODES_0001 = {
    "ix_episodes_group_id",
    "ix_episodes_run_created",
    "ix_episodes_run_outcome",
    "ix_episodes_run_reward",
    "ix_episodes_env_created",
}


def schema(url: str) -> dict[str, tuple[set[str], set[str]]]:
    """Table -> (its columns, its indexes), as the database has them."""
    engine = make_engine(url)
    inspector = sqlalchemy.inspect(engine)
    found = {
        table: (
            {column["name"] for column in inspector.get_columns(table)},
            {index["name"] for index in inspector.get_indexes(table)},
        )
        for table in inspector.get_table_names()
        if table != "alembic_version"
    }
    engine.dispose()
    return found


def test_upgrade_from_empty_and_downgrade_back(empty_database_url: str) -> None:
    assert schema(empty_database_url) == {}
    upgrade(empty_database_url)
    tables = schema(empty_database_url)
    assert set(tables) == {"episodes", "api_keys"}
    assert "tenant" in tables["episodes"][0]
    assert tables["episodes"][1] == EPISODES_0001 | {"ix_episodes_tenant_run_created"}
    assert tables["api_keys"] == (
        {"id", "tenant", "role", "hash", "name", "quotas", "created_at", "revoked_at"},
        {"ix_api_keys_hash"},
    )
    engine = make_engine(empty_database_url)
    assert current_revision(engine) == head_revision() == "0002"
    downgrade(empty_database_url, "0001")  # as 0001 left it: no tenant, no keys
    tables = schema(empty_database_url)
    assert set(tables) == {"episodes"} and "tenant" not in tables["episodes"][0]
    assert tables["episodes"][1] == EPISODES_0001
    downgrade(empty_database_url, "base")
    assert schema(empty_database_url) == {}
    assert current_revision(engine) is None
    upgrade(empty_database_url)  # and up again
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_upgrading_keeps_the_archived_episodes(empty_database_url: str) -> None:
    """Episodes archived before tenants existed stay, as episodes of no tenant."""
    upgrade(empty_database_url, "0001")
    engine = make_engine(empty_database_url)
    row = _row(tictactoe_record(0, "win"))
    del row["tenant"]
    with engine.begin() as connection:
        connection.execute(ArchivedEpisode.__table__.insert(), [row])
    engine.dispose()
    upgrade(empty_database_url)
    archive = Archive(empty_database_url)
    [run] = archive.runs(tenant=None, limit=10, offset=0).runs
    assert (run.run, run.tenant, run.episodes) == ("run-a", None, 1)
    [episode] = archive.episodes("run-a", EpisodeFilter(), tenant=None, limit=10, offset=0).episodes
    assert episode == tictactoe_record(0, "win")
    archive.dispose()


def test_the_models_match_the_migrations(database_url: str) -> None:
    engine = make_engine(database_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []
