"""The request body's size, limited at the edge: before the application reads it.

A 300 MB body used to be read whole and parsed before its 413 (memory from 186 MB
to 1.44 GB, 13 s, another client waiting 7 s). Here a declared ``Content-Length``
over the limit is refused before a byte is read, and a body that comes without one
(chunked) is cut off as soon as it passes the limit: the route reading it gets a 413
``HTTPException`` (which FastAPI's own body parsing passes on, where it would turn any
other exception into a 400), answered as 413 ``payload_too_large``.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wander.service.api.errors import error_response
from wander.service.errors import PayloadTooLarge


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            response = error_response(413, PayloadTooLarge.code, self._message())
            response.headers["connection"] = "close"  # the unread body must not be parsed
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited, send)

    def _message(self) -> str:
        return f"the request body exceeds {self.max_bytes} bytes (WANDER_MAX_BODY_BYTES)"


def _content_length(scope: Scope) -> int | None:
    """The declared body size; None when absent. A malformed one is left to the server
    (uvicorn refuses it) and counts as absent here: the read is limited anyway."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None
