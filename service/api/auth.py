"""Who may call what: one ASGI middleware in front of every route, HTTP and WebSocket.

It finds the caller's principal (``service.keyring``), checks that its role may call
the route, spends one token of its key's rate limit, and leaves the principal in the
request's scope (``principal_of``) for the routes to scope their reads and writes to
its tenant. One place for all of it, rather than a dependency on each router, so that
no route can be added without it, and because the hot routes skip FastAPI's
dependency solver (``routing.JSONBodyRoute``).

Which role a route needs follows from its path:

- ``/healthz``, ``/readyz``, the API's documentation (``/docs``, ``/openapi.json``,
  their assets) and the web console's pages (``/console/...``): anyone; they hold no
  data, and a browser cannot send a key to load ``/docs`` or ``/console``, where the
  page then asks for one;
- ``/metrics`` and ``/v1/admin/...``: ``admin``;
- ``/v1/runs...``: ``trainer``;
- everything else (episodes, steps, environments, the OpenEnv surface): ``agent``.

The key comes as ``Authorization: Bearer <key>``, or as the password of HTTP Basic
auth, which clients that take only a URL send from ``http://user:<key>@host/...``
(OpenEnv 0.4's and Verifiers' clients, anything built on ``websockets`` or httpx).

Each protected request is one audit line (logger ``wander.service.audit``): tenant,
key id (never the key), method, route, path and status, plus what the route added
with ``audit`` (the ids of the episodes it created or stepped).
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import math
import time
from typing import Any

from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wander.service import metrics
from wander.service.api.console import CONSOLE_URL
from wander.service.api.docs import ASSETS_URL, DOCS_URL, OAUTH2_REDIRECT_URL, REDOC_URL
from wander.service.api.errors import STATUS_BY_CODE, error_response
from wander.service.errors import Forbidden, RateLimited, Unauthorized, WanderError
from wander.service.keyring import Keyring
from wander.service.store import EpisodeStore
from wander.service.tenancy import OPEN, Principal, Role

audit_log = logging.getLogger("wander.service.audit")

PRINCIPAL = "wander.principal"
"""The scope key of the request's principal."""
AUDIT = "wander.audit"
"""The scope key of what a route adds to the request's audit line."""
PUBLIC = frozenset({"/healthz", "/readyz", "/openapi.json", DOCS_URL, REDOC_URL,
                    OAUTH2_REDIRECT_URL, CONSOLE_URL})  # fmt: skip
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="wander"'}


def principal_of(scope: Any) -> Principal:
    """The principal of a request (its scope, or a ``Request``/``WebSocket``). An app
    that includes Wander's routers in its own must add ``AuthMiddleware`` too: without
    it this fails (a 500), rather than let the request through as anyone."""
    principal: Principal = (scope if isinstance(scope, dict) else scope.scope)[PRINCIPAL]
    return principal


def audit(scope: Any, **fields: Any) -> None:
    """Add ``fields`` to the request's audit line."""
    (scope if isinstance(scope, dict) else scope.scope).setdefault(AUDIT, {}).update(fields)


def required_role(path: str) -> Role | None:
    """The least role that may call ``path``; None: anyone."""
    if path in PUBLIC or path.startswith((ASSETS_URL + "/", CONSOLE_URL + "/")):
        return None
    if path == "/metrics" or path.startswith("/v1/admin/") or path == "/v1/admin":
        return Role.admin
    if path == "/v1/runs" or path.startswith("/v1/runs/"):
        return Role.trainer
    return Role.agent


def route_path(scope: Scope) -> str:
    """The path the routes match: without the ``root_path`` the app is served under
    (``uvicorn --root-path``, a mount in another app), which the server puts in front of
    ``path`` and the router takes off again. Judged on the whole path, a role would be
    the one of a path no route has (``/prefix/metrics`` read as an agent's route)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


class RateLimiter:
    """Each key's requests per second, counted in the store's token buckets (shared by
    every replica through Redis)."""

    def __init__(self, store: EpisodeStore) -> None:
        self.store = store
        self._blocked: dict[str, float] = {}
        """Keys refused by their rate limit, until when: refused again here, without
        asking the store, so that a flood of them costs the store nothing."""

    async def take(self, principal: Principal) -> None:
        """One token of the key's rate limit, or ``RateLimited``."""
        rate, burst = principal.quotas.requests_per_second, principal.quotas.burst
        if rate is None or principal.key_id is None:
            return
        now = time.monotonic()
        until = self._blocked.get(principal.key_id, 0.0)
        if until <= now:
            wait = await self.store.take(principal.key_id, rate, burst or math.ceil(rate))
            if wait <= 0:
                return
            until = self._blocked[principal.key_id] = now + wait
        _key_requests(principal.key_id, "rate_limited").inc()
        raise RateLimited(
            f"this key may send {rate:g} requests a second (burst {burst}): retry later",
            round(until - now, 3),
        )


class AuthMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        needed = required_role(route_path(scope))
        if needed is None:
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        try:
            principal = await _admit(scope, state.keyring, state.limiter, needed)
        except WanderError as exc:
            await _refuse(scope, receive, send, exc)
            return
        scope[PRINCIPAL] = principal
        if principal.key_id is None:  # an open service: nothing to count or audit
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "websocket.accept":
                status = 101
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            _key_requests(principal.key_id, _outcome(status)).inc()
            if state.audit_log:
                _audit(scope, principal, status)


async def _admit(scope: Scope, keyring: Keyring, limiter: RateLimiter, needed: Role) -> Principal:
    if not keyring.required:
        return OPEN
    try:
        principal = await keyring.principal(_secret(scope))
    except Unauthorized as exc:
        _AUTH_FAILURES.labels("missing" if "needs" in exc.message else "unknown").inc()
        raise
    if not principal.role.allows(needed):
        _key_requests(principal.key_id, "forbidden").inc()
        raise Forbidden(f"the {principal.role} role may not call this route ({needed})")
    await limiter.take(principal)
    return principal


def _secret(scope: Scope) -> str | None:
    """The key in the ``Authorization`` header: a bearer token, or Basic auth's password
    (its user name when there is no password)."""
    header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    if header is None:
        return None
    scheme, _, value = header.decode("latin-1").strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or user or None
    return None


async def _refuse(scope: Scope, receive: Receive, send: Send, exc: WanderError) -> None:
    """Answer ``exc`` in the API's error shape; a WebSocket handshake gets the same HTTP
    answer where the server can send one (else it is closed: policy violation)."""
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers = CHALLENGE
    elif isinstance(exc, RateLimited):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    elif STATUS_BY_CODE[exc.code] == 503:
        headers = {"Retry-After": "1"}
    response = error_response(STATUS_BY_CODE[exc.code], exc.code, exc.message, exc.details,
                              headers)  # fmt: skip
    if scope["type"] == "http":
        await response(scope, receive, send)
    elif "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": response.status_code,
                    "headers": response.raw_headers})  # fmt: skip
        await send({"type": "websocket.http.response.body", "body": response.body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": exc.code})


def _outcome(status: int) -> str:
    if status == 429:
        return "quota_exceeded"  # the middleware counts its own rate_limited refusals
    return {4: "client_error", 5: "server_error"}.get(status // 100, "ok")


def _audit(scope: Scope, principal: Principal, status: int) -> None:
    route = getattr(scope.get("route"), "path", "unmatched")
    audit_log.info(
        "audit",
        extra={
            "tenant": principal.tenant,
            "key_id": principal.key_id,
            "role": str(principal.role),
            "method": scope.get("method", "WEBSOCKET"),
            "route": route,
            "path": scope["path"],
            "status": status,
            **scope.get(AUDIT, {}),
        },
    )


_AUTH_FAILURES = Counter(
    "wander_auth_failures_total",
    "Requests refused with 401: no key (`missing`), or an unknown or revoked one (`unknown`).",
    ["reason"],
)


@functools.cache
def _key_requests(key_id: str, outcome: str) -> Counter:
    """Requests of one key by outcome (``ok``, ``client_error``, ``server_error``,
    ``forbidden``, ``rate_limited``, ``quota_exceeded``): its cardinality is the number of
    keys times six,
    and keys are made by an admin, never by a caller."""
    return metrics.KEY_REQUESTS.labels(key_id, outcome)
