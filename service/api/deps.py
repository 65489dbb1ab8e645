"""Dependencies shared by the routers (async: FastAPI runs sync ones in a thread pool)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from wander.service.archive import Archive
from wander.service.catalog import Catalog
from wander.service.engine import Engine
from wander.service.keyring import Keyring


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


async def get_catalog(request: Request) -> Catalog:
    catalog: Catalog = request.app.state.catalog
    return catalog


async def get_engine(request: Request) -> Engine:
    return engine_of(request)


async def get_archive(request: Request) -> Archive:
    archive: Archive = request.app.state.archive
    return archive


async def get_keyring(request: Request) -> Keyring:
    keyring: Keyring = request.app.state.keyring
    return keyring


EngineDep = Annotated[Engine, Depends(get_engine)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
ArchiveDep = Annotated[Archive, Depends(get_archive)]
KeyringDep = Annotated[Keyring, Depends(get_keyring)]
