"""One ASGI middleware for what every request needs: a request id, a log line,
metrics by route, and the worker's pid (``X-Wander-Worker``, for debugging which
replica served what)."""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wander.service import metrics
from wander.service.logs import request_id

log = logging.getLogger("wander.service.requests")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""A client's ``X-Request-ID`` as it may reach the logs and the response; any other
(control characters, quotes, a forged log line) is replaced by one of ours."""
WORKER = str(os.getpid()).encode()


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if REQUEST_ID.fullmatch(incoming) else secrets.token_hex(8)
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), (b"x-request-id", rid.encode()),
                           (b"x-wander-worker", WORKER)]  # fmt: skip
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            _requests(route, method, status).inc()
            _latency(route, method).observe(elapsed)
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "request",
                    extra={
                        "method": method,
                        "route": route,
                        "path": scope["path"],
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                    },
                )
            request_id.reset(token)


# Labelled children, bound once per label set: ``labels()`` costs more than the
# observation. Routes are the app's templates, so the sets are few.


@functools.cache
def _requests(route: str, method: str, status: int) -> Counter:
    return metrics.REQUESTS.labels(route, method, str(status))


@functools.cache
def _latency(route: str, method: str) -> Histogram:
    return metrics.REQUEST_LATENCY.labels(route, method)
