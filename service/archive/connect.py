"""Engines for the archive database, set up the same way for the service and migrations."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine


def _json(value: Any) -> str:
    """JSON columns through orjson: the archiver writes every finished episode's messages."""
    return orjson.dumps(value).decode()


def make_engine(url: str) -> Engine:
    """An engine that fails fast when the database is down, instead of hanging a worker."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 10}, json_serializer=_json)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(connection: Any, _: Any) -> None:
            # WAL lets the runs API read while the archiver writes.
            connection.execute("PRAGMA journal_mode=WAL")

        return engine
    connect_args = {"connect_timeout": 5} if url.startswith("postgresql") else {}
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args, json_serializer=_json)
