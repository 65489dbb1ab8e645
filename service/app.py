"""The FastAPI application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.api import environments, episodes, health
from service.api.errors import install_error_handlers
from service.engine import Engine
from service.envs import Registry
from service.settings import Settings
from service.store import open_store


def create_app(settings: Settings | None = None) -> FastAPI:
    """The Wander service; settings default to the ``WANDER_*`` environment."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = open_store(settings)
        app.state.engine = Engine(store, Registry.from_entry_points(), settings)
        try:
            yield
        finally:
            await store.aclose()

    app = FastAPI(
        title="Wander",
        summary="Environments as a service for reinforcement learning of language-model agents.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.include_router(environments.router)
    app.include_router(episodes.router)
    app.include_router(health.router)
    return app
