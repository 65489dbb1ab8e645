"""An upstream that answers with what reached it: ``python -m uvicorn tests.echo:app``.

Every HTTP request gets 200 with ``{"headers": {...}, "scheme": ..., "path": ...}``; a
WebSocket is accepted and sent the same as its one message. Behind a proxy, it shows
what the proxy passes on (headers, the scheme uvicorn takes from X-Forwarded-Proto).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope, Send


def _seen(scope: Scope) -> str:
    headers = {name.decode(): value.decode() for name, value in scope["headers"]}
    return json.dumps({"headers": headers, "scheme": scope["scheme"], "path": scope["path"]})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await receive()  # lifespan.startup
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})
    elif scope["type"] == "http":
        body = _seen(scope).encode()
        headers: list[Any] = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    else:  # websocket
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": _seen(scope)})
        await send({"type": "websocket.close"})
