"""A real Wander service that wants a key, for the tests of what every client sends.

``keyed_service`` runs ``python -m uvicorn --factory tests.keyed:keyed_app``: the service
as ``wander serve`` builds it, with a stand-in for its key check (issue #22) in front of
every route but the health checks: a request without ``Authorization: Bearer KEY`` is
401 ``unauthorized``. A command that works against it sent the key with every request
it made; one that forgot it on any request fails with that 401.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI
from starlette.requests import HTTPConnection

from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.errors import Unauthorized
from wander.testing import ServiceProcess

KEY = "wdr_test-only-key"
UNCHECKED = ("/healthz", "/readyz")
"""Where a process manager looks without a key (and ``ServiceProcess.start`` too)."""


async def require_key(connection: HTTPConnection) -> None:
    if connection.url.path in UNCHECKED:
        return
    if connection.headers.get("authorization") != f"Bearer {KEY}":
        raise Unauthorized("this service wants a key: Authorization: Bearer <key>")


def keyed_app() -> FastAPI:
    """The service on the ``WANDER_*`` settings, behind ``require_key``."""
    return create_app(dependencies=[Depends(require_key)])


def keyed_service(folder: Path) -> ServiceProcess:
    """The keyed service started (in-process store, a SQLite archive in ``folder``)."""
    database = f"sqlite:///{folder}/archive.db"
    upgrade(database)
    env = {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}
    command = ("--factory", "tests.keyed:keyed_app")
    return ServiceProcess(env, command, module="uvicorn").start()
