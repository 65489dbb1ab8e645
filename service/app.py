"""The FastAPI application."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI, params
from fastapi.telemetry import TelemetryConfig

from wander.service import logs
from wander.service.api import admin, environments, episodes, health, openenv, runs
from wander.service.api.auth import AuthMiddleware, RateLimiter
from wander.service.api.console import install_console
from wander.service.api.docs import install_docs
from wander.service.api.errors import install_error_handlers
from wander.service.api.limits import BodyLimitMiddleware
from wander.service.api.observability import ObservabilityMiddleware
from wander.service.api.openapi import install_openapi
from wander.service.archive import Archive, KeyBook
from wander.service.archive.writer import writer_for
from wander.service.archiver import Archiver
from wander.service.catalog import Catalog
from wander.service.engine import Engine
from wander.service.keyring import Keyring
from wander.service.settings import Settings
from wander.service.store import open_store

log = logging.getLogger(__name__)

YOUNG_COLLECTIONS_PER_FULL = 100
"""Collections of the middle generation between two full ones, at least (Python's default
is 10). Even after ``gc.freeze()``, a full collection walks the ~25-33k objects that the
sessions keep alive (their coroutines, sockets, the store's cache) in ~10 ms of CPU, and
under 64 WebSocket sessions it came every ~1.3 s: 68-92% of the steps at or above p99
overlapped one, against 2-3% of all steps. At 100, runs of 8 rounds saw 2-5 full
collections instead of 22-29, and the slow steps overlapping one fell to 3-18%. Full
collections had reclaimed almost nothing (0 objects, now and then ~600), so garbage
waits little longer (bench/README.md, "The WebSocket tail")."""

NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}
"""FastAPI's native OpenTelemetry, off unless ``WANDER_OTEL``. On (FastAPI's default), every
request first asks OpenTelemetry whether global providers are configured (three provider
lookups, each reading ``os.environ``): 6-8 µs of CPU per single-step request, of ~85 µs
for the whole HTTP layer with the engine stubbed out (one process serving both apps, 15
interleaved rounds of 2,000 requests, two runs on a shared machine: medians 89.2 -> 81.2
and 91.8 -> 85.5 µs). Wander reports through ``/metrics`` and its JSON logs either way."""


def create_app(
    settings: Settings | None = None, *, dependencies: Sequence[params.Depends] = ()
) -> FastAPI:
    """The Wander service; settings default to the ``WANDER_*`` environment.

    ``dependencies`` run before every route, the hot ones included. Authentication is
    not one of them: ``api.auth.AuthMiddleware`` covers every route, WebSockets too."""
    settings = settings or Settings()
    logs.configure(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        archive = Archive(settings.database_url)
        keyring = Keyring(settings, KeyBook(archive))
        try:
            await keyring.check_start()
        except Exception:
            archive.dispose()
            raise
        store = open_store(settings)
        writer = writer_for(settings.archive_writer, archive, settings.archive_writer_processes)
        archiver = Archiver(store, archive, writer=writer)
        catalog = Catalog.installed()
        app.state.catalog = catalog
        app.state.engine = Engine(store, catalog, settings, archive)
        app.state.archive = archive
        app.state.archiver = archiver
        app.state.keyring = keyring
        app.state.limiter = RateLimiter(store)
        await writer.start()
        worker = asyncio.create_task(archiver.run(), name="archiver")
        # What is alive now (modules, the app, the catalog: ~250k objects) lives as long
        # as the service; frozen, the full collections that the churn of requests sets
        # off stop walking it each time (bench/README.md). Unfrozen when the service
        # stops, so that a process running many apps (the tests) can still free them.
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*thresholds[:2], YOUNG_COLLECTIONS_PER_FULL)
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            archiver.stop()
            await worker
            await _flush(archiver)
            await archiver.writer.aclose()
            await app.state.engine.aclose()
            archive.dispose()
            await store.aclose()

    app = FastAPI(
        telemetry=None if settings.otel else NO_TELEMETRY,
        title="Wander",
        summary="Environments as a service for reinforcement learning of language-model agents.",
        version="0.1.0",
        lifespan=lifespan,
        dependencies=dependencies,
        docs_url=None,  # served by install_docs, without a CDN
        redoc_url=None,
    )
    app.state.audit_log = settings.audit_log
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(AuthMiddleware)  # before any body is read
    app.add_middleware(ObservabilityMiddleware)  # the outer one: it sees every request
    app.include_router(episodes.router)  # first: routes are matched in order
    app.include_router(environments.router)
    app.include_router(runs.router)
    app.include_router(health.router)
    app.include_router(admin.router)
    app.include_router(openenv.router)  # OpenEnv's routes and WebSocket under /openenv/{env}
    install_docs(app)
    if settings.console:
        install_console(app)
    install_openapi(app)
    return app


async def _flush(archiver: Archiver) -> None:
    """Archive what is still queued before the process goes."""
    try:
        written = await archiver.flush()
    except Exception as exc:
        if archiver.store.durable:
            log.warning("the archive backlog stays queued in the store until a restart: %s", exc)
        else:
            lost = await archiver.store.backlog()
            log.error("%d finished episodes are lost, the archive refused them: %s", lost, exc)
    else:
        if written:
            log.info("archived %d finished episodes at shutdown", written)
