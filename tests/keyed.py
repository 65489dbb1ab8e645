"""A real ``wander serve`` that wants a key, for the tests of what every client sends.

The service runs with ``WANDER_API_KEYS=team:admin:KEY``: a request without
``Authorization: Bearer KEY`` (or with another key) is 401 ``unauthorized`` on every
route but the probes. A command that works against it sent the key with every request it
made; one that forgot it on any request fails with that 401. The key is an admin's, so
that no role or rate limit gets in the way of what these tests look at.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import migrate
from wander.testing import ServiceProcess

KEY = "wdr_test-only-key"


def keyed_service(folder: Path) -> ServiceProcess:
    """The keyed service started (in-process store, a SQLite archive in ``folder``)."""
    database = f"sqlite:///{folder}/archive.db"
    migrate(database)
    env = {
        "WANDER_DATABASE_URL": database,
        "WANDER_REDIS_URL": "",
        "WANDER_API_KEYS": f"team:admin:{KEY}",
    }
    return ServiceProcess(env).start()
