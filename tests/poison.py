"""Poison for the archive: records PostgreSQL refuses, a database that refuses some on
its own, and the way such records reach the backlog (for the dead-letter tests)."""

from __future__ import annotations

import uuid

import sqlalchemy

from wander.client.models import EpisodeRecord
from wander.service.store import EpisodeStore

NUL_RUN = "a\u0000b"
"""A run label PostgreSQL cannot store (SQLite can)."""

REFUSE_CURSED = (
    """CREATE FUNCTION refuse_cursed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.run = 'cursed' THEN RAISE EXCEPTION 'cursed runs are refused'; END IF;
      RETURN NEW;
    END $$""",
    """CREATE TRIGGER refuse_cursed BEFORE INSERT OR UPDATE ON episodes
    FOR EACH ROW EXECUTE FUNCTION refuse_cursed()""",
)
"""A database that refuses some records for a reason of its own (an error that names no
value or constraint): the archiver cannot tell at once whether the record is to blame."""


def execute(url: str, *statements: str) -> None:
    """Run SQL statements on the database at ``url``, each committed."""
    engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.execute(sqlalchemy.text(statement))
    finally:
        engine.dispose()


async def queue(store: EpisodeStore, *records: EpisodeRecord | bytes) -> None:
    """Put records in the store's archive backlog as the step that ends an episode does:
    in the write that finishes it. Bytes go in as they are (a record may be anything)."""
    for record in records:
        data = record if isinstance(record, bytes) else record.model_dump_json().encode()
        episode_id = f"queued-{uuid.uuid4().hex}"
        await store.add({episode_id: b"{}"}, "tictactoe")
        assert await store.replace(episode_id, 1, b"{}", archive=data)
