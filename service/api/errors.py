"""The API's error shape: ``{"error": {"code", "message", "details"}}`` with a fitting status.

Every error leaves through here, including FastAPI's own validation errors and
unknown routes, so clients see one shape for all of them and never a bare 500
for bad input.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match

from wander.client.error_codes import ErrorCode
from wander.client.models import ErrorResponse
from wander.service import errors as engine_errors
from wander.service import metrics
from wander.service.errors import WanderError

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[ErrorCode, int] = {code: code.status for code in ErrorCode}
"""Each code's status, from the one table of codes (``wander.client.error_codes``)."""
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
RETRY_AFTER_SECONDS = 1
CLIENT_CLOSED_REQUEST = 499
"""nginx's status for a request whose client left before the answer: never sent (no one
is there to read it), but what the request log and ``wander_requests_total`` record."""
CODE_BY_HTTP_STATUS = {
    code.status: code
    for code in (ErrorCode.NOT_FOUND, ErrorCode.METHOD_NOT_ALLOWED, ErrorCode.PAYLOAD_TOO_LARGE)
}
"""The codes of the framework's own errors (``HTTPException``); any other status keeps
its own, with ``http_error``."""
NOT_JSON = "send the body as JSON, with Content-Type: application/json"

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse}
    for status in sorted(
        {error.code.status for error in vars(engine_errors).values()
         if isinstance(error, type) and issubclass(error, WanderError)}
    )
}  # fmt: skip
"""For route decorators: documents the error shape in the OpenAPI schema."""


def error_response(
    status: int,
    code: ErrorCode,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    metrics.ERRORS.labels(code).inc()
    return JSONResponse(body, status_code=status, headers=headers)


async def _wander_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, WanderError)
    code = ErrorCode(exc.code)
    if code is ErrorCode.STORE_UNAVAILABLE:
        metrics.STORE_ERRORS.inc()
    elif code is ErrorCode.DATABASE_UNAVAILABLE:
        metrics.DATABASE_ERRORS.inc()
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if code.status == 503 else None
    return error_response(code.status, code, exc.message, exc.details, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(error["type"] == "json_invalid" for error in errors):
        return error_response(400, ErrorCode.BAD_REQUEST, "the request body is not valid JSON")
    if "json" not in request.headers.get("content-type", "") and any(
        error["loc"] == ("body",) for error in errors
    ):
        return error_response(400, ErrorCode.BAD_REQUEST, NOT_JSON)
    details = [
        {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]} for error in errors
    ]
    return error_response(422, ErrorCode.VALIDATION_ERROR, "the request is invalid", details)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = CODE_BY_HTTP_STATUS.get(exc.status_code, ErrorCode.HTTP_ERROR)
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed_methods(request)}
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path. Starlette's ``Allow`` names those of
    the first route with the path only, so a path served by two routes (GET and DELETE
    ``/v1/episodes/{id}``) would deny one of them (schemathesis found it)."""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL
               for route in routes)
    )  # fmt: skip


async def _client_disconnect(request: Request, exc: Exception) -> Response:
    """A client that left mid-body (it gave up, or its connection broke) is not the
    service's error: one line in the log, no traceback, and no 500 in the metrics."""
    log.warning("client left mid-body: %s %s", request.method, request.url.path)
    return Response(status_code=CLIENT_CLOSED_REQUEST)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, ErrorCode.INTERNAL_ERROR, "internal server error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(WanderError, _wander_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_disconnect)
    app.add_exception_handler(Exception, _unexpected_error)
