"""Alembic migrations on SQLite and PostgreSQL: up from empty, down to nothing, no drift."""

from __future__ import annotations

import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from wander.service.archive.connect import make_engine
from wander.service.archive.migrations import current_revision, downgrade, head_revision, upgrade
from wander.service.archive.tables import Base


def tables_and_indexes(url: str) -> tuple[set[str], set[str]]:
    engine = make_engine(url)
    inspector = sqlalchemy.inspect(engine)
    tables = set(inspector.get_table_names())
    indexes = (
        {ix["name"] for ix in inspector.get_indexes("episodes")} if "episodes" in tables else set()
    )
    engine.dispose()
    return tables, indexes


def test_upgrade_from_empty_and_downgrade_back(empty_database_url: str) -> None:
    assert tables_and_indexes(empty_database_url) == (set(), set())
    upgrade(empty_database_url)
    tables, indexes = tables_and_indexes(empty_database_url)
    assert tables == {"episodes", "alembic_version"}
    assert indexes == {
        "ix_episodes_group_id",
        "ix_episodes_run_created",
        "ix_episodes_run_outcome",
        "ix_episodes_run_reward",
        "ix_episodes_env_created",
    }
    engine = make_engine(empty_database_url)
    assert current_revision(engine) == head_revision() == "0001"
    downgrade(empty_database_url, "base")
    assert tables_and_indexes(empty_database_url)[0] == {"alembic_version"}
    assert current_revision(engine) is None
    upgrade(empty_database_url)  # and up again
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_the_models_match_the_migrations(database_url: str) -> None:
    engine = make_engine(database_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []
