"""The HTTP edge: limits set on the connection, before the application reads anything.

uvicorn (httptools) reads a request's headers however large and however slowly they
come, and keeps every connection a client opens: 20,000 sockets that each sent half a
header line stayed open, and a 12 MB header was read in full. ``EdgeProtocol`` is
uvicorn's own protocol with four limits added, each a setting (``service.settings``):

- ``WANDER_MAX_HEADER_BYTES``: the request line and headers, counted as they arrive;
  past it the answer is 431 ``headers_too_large`` and the connection is closed, so the
  rest is never read.
- ``WANDER_HEADER_TIMEOUT_SECONDS``: a connection's next request must have sent all its
  headers this long after it began (or after the connection opened), or it is closed
  with 408 (slowloris).
- ``WANDER_REQUEST_TIMEOUT_SECONDS``: the whole request, body included, must have come
  in this long after it began (slow bodies).
- ``WANDER_MAX_CONNECTIONS``: connections held open by one worker process; one past it
  is answered 503 ``server_busy`` and closed at once.

Between requests, uvicorn's keep-alive timeout (``WANDER_KEEP_ALIVE_SECONDS``) closes an
idle connection. Why a subclass and not a middleware: an ASGI middleware runs once the
headers are read, too late for all four. The methods it extends are httptools' parser
callbacks and asyncio's protocol methods, which uvicorn implements; pyproject.toml caps
uvicorn below its next minor version for that reason.
"""

from __future__ import annotations

import asyncio
import json
from functools import cache
from http import HTTPStatus
from typing import Any, NamedTuple

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wander.client.error_codes import ErrorCode
from wander.service.settings import Settings

HEADERS_END = b"\r\n\r\n"


class EdgeLimits(NamedTuple):
    max_header_bytes: int
    header_timeout: float
    request_timeout: float
    max_connections: int


@cache
def edge_limits() -> EdgeLimits:
    """The limits of this process, read once from its settings (``WANDER_*``)."""
    settings = Settings()
    return EdgeLimits(
        settings.max_header_bytes,
        settings.header_timeout_seconds,
        settings.request_timeout_seconds,
        settings.max_connections,
    )


def error_bytes(code: ErrorCode, message: str) -> bytes:
    """A whole response in the API's error shape, with ``code``'s status, that closes the
    connection."""
    body = json.dumps({"error": {"code": code, "message": message, "details": None}}).encode()
    status = HTTPStatus(code.status)
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with the edge's limits (the module says which)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = edge_limits()
        self._header_bytes = 0
        self._in_headers = True
        self._tail = b""
        self._timers: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            message = "the service holds as many connections as it may; try again"
            transport.write(error_bytes(ErrorCode.SERVER_BUSY, message))
            transport.close()
            return
        self._arm()  # a connection that sends nothing is closed too

    def data_received(self, data: bytes) -> None:
        if self._in_headers and self._past_header_limit(data):
            limit = self.limits.max_header_bytes
            message = f"the request line and headers exceed {limit} bytes"
            self._refuse(error_bytes(ErrorCode.HEADERS_TOO_LARGE, message))
            return
        super().data_received(data)

    def _past_header_limit(self, data: bytes) -> bool:
        """Whether the headers, counted so far and with ``data``, pass the limit before
        they end (body bytes after their end in the same ``data`` do not count)."""
        room = self.limits.max_header_bytes - self._header_bytes
        carried, seen = len(self._tail), self._tail + data  # a terminator split over reads
        self._header_bytes += len(data)
        self._tail = seen[-(len(HEADERS_END) - 1) :]
        return len(data) > room and HEADERS_END not in seen[: carried + room]

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()  # a keep-alive connection's next request: its own deadlines

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._cancel(self._timers[:1])  # the header deadline; the request's goes on
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel(self._timers)  # read whole: answering it may take what it takes
        self._in_headers, self._header_bytes, self._tail = True, 0, b""
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._cancel(self._timers)
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel(self._timers)
        super().connection_lost(exc)

    def _arm(self) -> None:
        """Time the request from now: its headers, and all of it."""
        self._cancel(self._timers)
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.call_later(self.limits.header_timeout, self._timed_out, "headers"),
            loop.call_later(self.limits.request_timeout, self._timed_out, "request"),
        ]

    def _timed_out(self, what: str) -> None:
        """Close a connection whose request did not come in time (the timers stop once a
        request has been read: never one that is being answered)."""
        seconds = self.limits.header_timeout if what == "headers" else self.limits.request_timeout
        message = f"the {what} did not arrive within {seconds:g} s"
        self._refuse(error_bytes(ErrorCode.REQUEST_TIMEOUT, message))

    def _refuse(self, response: bytes) -> None:
        self._cancel(self._timers)
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()

    @staticmethod
    def _cancel(timers: list[asyncio.TimerHandle]) -> None:
        for timer in timers:
            timer.cancel()
