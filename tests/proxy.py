"""A TCP proxy that a test can cut and restore, to simulate a database outage."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import sqlalchemy

from wander.testing import free_port


class OutageProxy:
    """Forwards 127.0.0.1:<port> to a target; while down, drops every connection."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._up = True
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> OutageProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(5)
        return self

    def __exit__(self, *_: object) -> None:
        self.down()
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def down(self) -> None:
        self._up = False
        asyncio.run_coroutine_threadsafe(self._drop_all(), self._loop).result(5)

    def up(self) -> None:
        self._up = True

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _close(self) -> None:
        """Stop listening: the port is free again once the proxy is gone."""
        self._server.close()
        await self._server.wait_closed()

    async def _drop_all(self) -> None:
        for writer in list(self._writers):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._up:
            writer.close()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )
        self._writers -= {writer, upstream_writer}

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()


@contextlib.contextmanager
def behind_proxy(database_url: str) -> Iterator[tuple[OutageProxy, str]]:
    """The database at ``database_url`` behind an ``OutageProxy``: yields the proxy and
    the URL that reaches the database through it."""
    target = sqlalchemy.make_url(database_url)
    with OutageProxy(target.host or "127.0.0.1", target.port or 5432) as outage:
        url = target.set(host="127.0.0.1", port=outage.port)
        yield outage, url.render_as_string(hide_password=False)
