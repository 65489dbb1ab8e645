"""One table of error codes (``wander.client.error_codes.ErrorCode``): every code the
service answers is in it, the service's statuses and the client's classes and retries
come from it, and the OpenAPI document lists it. A code added in one place only fails
here (docs/api.md's table is checked in ``tests/test_docs.py``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from wander.client import NO_RETRY, AsyncWanderClient, Retry, WanderAPIError, WanderClient
from wander.client.error_codes import ErrorCode
from wander.client.errors import ERRORS_BY_CODE, ERRORS_BY_STATUS
from wander.client.models import ErrorInfo, StepError
from wander.service import errors as service_errors
from wander.service.api.errors import ERROR_RESPONSES, STATUS_BY_CODE, install_error_handlers
from wander.service.app import create_app
from wander.service.settings import Settings

SERVICE = Path(service_errors.__file__).resolve().parent
FAST = Retry(attempts=3, backoff_seconds=0.001)
ANSWERING = {"error_response": 1, "error_bytes": 0}
"""The service's functions that answer an error by hand, and where their code goes."""
APART_FROM_STATUS = {ErrorCode.QUOTA_EXCEEDED, ErrorCode.HTTP_ERROR}
"""Codes whose class is not that of their status: a quota to free is not a rate to wait
for (both 429), and ``http_error`` is typed by whatever status it came with."""


def subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def test_every_error_the_service_raises_has_a_code_of_the_table() -> None:
    raised = [
        error
        for error in vars(service_errors).values()
        if isinstance(error, type) and issubclass(error, service_errors.WanderError)
    ]
    raised += [
        error
        for error in subclasses(service_errors.WanderError)
        if error.__module__.startswith("wander.service")  # not a test's own
    ]
    assert len(raised) > 20
    assert [error for error in raised if not isinstance(error.code, ErrorCode)] == []


def code_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Codes written by hand in a module: a string given to ``error_response`` or
    ``error_bytes``, a ``{"code": "..."}`` literal, a class's ``code = "..."``, and the
    names of ``ErrorCode.NAME``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            where = ANSWERING.get(node.func.id, len(node.args))
            given = node.args[where] if where < len(node.args) else None
            keyword = next((kw.value for kw in node.keywords if kw.arg == "code"), None)
            code = given or (keyword if node.func.id in ANSWERING else None)
            if isinstance(code, ast.Constant):
                yield node.lineno, f"{code.value!r} (use ErrorCode)"
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "code"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    yield node.lineno, value.value
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
                yield node.lineno, f"{node.value.value!r} (use ErrorCode)"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ErrorCode"
            and node.attr.isupper()
        ):
            yield node.lineno, node.attr


def test_every_code_the_service_answers_by_hand_is_in_the_table() -> None:
    """The HTTP edge, the error handlers and the engine's batch errors, among others."""
    values, names = {code.value for code in ErrorCode}, set(ErrorCode.__members__)
    found, unknown = 0, []
    for path in sorted(SERVICE.rglob("*.py")):
        for line, code in code_literals(ast.parse(path.read_text("utf-8"))):
            found += 1
            if code not in values and code not in names:
                unknown.append(f"{path.relative_to(SERVICE.parent)}:{line}: {code}")
    assert found > 10  # the scan sees the service's codes
    assert unknown == []


def test_the_scan_finds_a_code_written_by_hand() -> None:
    source = (
        'error_response(418, "teapot", "short and stout")\n'
        'error_bytes(code="busy_signal", message="x")\n'
        'error = {"code": "new_code", "message": "x"}\n'
        'class Teapot(WanderError):\n    code = "teapot"\n'
        "ErrorCode.NO_SUCH\n"
        "error_response(400, ErrorCode.BAD_REQUEST, 'fine')\n"
    )
    found = [code for _, code in code_literals(ast.parse(source))]
    assert sorted(found) == sorted(
        [
            "'teapot' (use ErrorCode)",
            "'busy_signal' (use ErrorCode)",
            "new_code",
            "'teapot' (use ErrorCode)",
            "NO_SUCH",
            "BAD_REQUEST",
        ]
    )


def raising(error: service_errors.WanderError) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/")
    async def fail() -> None:
        raise error

    return app


def service_error_classes() -> list[type[service_errors.WanderError]]:
    return [
        error
        for error in subclasses(service_errors.WanderError)
        if error.__module__ == service_errors.__name__ and "code" in vars(error)
    ]


def test_the_status_table_is_the_enums() -> None:
    assert {code: code.status for code in ErrorCode} == STATUS_BY_CODE


@pytest.mark.parametrize("error", service_error_classes(), ids=lambda error: error.__name__)
async def test_the_service_answers_each_error_with_its_codes_status(
    error: type[service_errors.WanderError],
) -> None:
    try:
        raised = error("no")
    except TypeError:  # RateLimited: with its retry_after
        raised = error("no", 1.0)  # type: ignore[call-arg]
    transport = httpx.ASGITransport(app=raising(raised))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        response = await http.get("/")
    assert response.status_code == error.code.status
    assert response.json()["error"]["code"] == error.code
    assert ("retry-after" in response.headers) == (error.code.status == 503)
    assert error.code.status in ERROR_RESPONSES  # the routes document its status


def test_only_answers_that_applied_nothing_are_retryable() -> None:
    """A retried request may be a create: only 429s and 503s say nothing was done."""
    assert {code.status for code in ErrorCode if code.retryable} <= {429, 503}
    assert all(code.retryable for code in ErrorCode if code.status == 503)
    assert not ErrorCode.QUOTA_EXCEEDED.retryable


def test_every_code_has_a_client_class_of_its_status() -> None:
    assert set(ERRORS_BY_CODE) == set(ErrorCode)
    for code, cls in ERRORS_BY_CODE.items():
        assert issubclass(cls, WanderAPIError), code
        family = ERRORS_BY_STATUS.get(code.status)
        if family is not None and code not in APART_FROM_STATUS:
            assert issubclass(cls, family), (code, cls, family)


def test_the_openapi_document_lists_the_codes() -> None:
    document = create_app(Settings(redis_url=None)).openapi()
    schema = document["components"]["schemas"]["ErrorInfo"]["properties"]["code"]
    assert schema["enum"] == [code.value for code in ErrorCode]


def test_an_unknown_code_is_parsed_as_a_string() -> None:
    """A service newer than the client may send a code the client lacks."""
    assert ErrorInfo.model_validate({"code": "env_busy", "message": "m"}).code is ErrorCode.ENV_BUSY
    error = StepError.model_validate_json(
        '{"episode_id": "ep_1", "error": {"code": "brand_new", "message": "m"}}'
    )
    assert error.error.code == "brand_new" and not isinstance(error.error.code, ErrorCode)
    assert error.model_dump(mode="json")["error"]["code"] == "brand_new"


def answering(status: int, code: str | None) -> httpx.MockTransport:
    """Answers every request with ``status`` and ``code`` in the API's error shape (none:
    a proxy's text answer), and ``Retry-After: 0``."""

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"Retry-After": "0"}
        if code is None:
            return httpx.Response(status, headers=headers, text="bad gateway")
        body = {"error": {"code": code, "message": "no", "details": None}}
        return httpx.Response(status, headers=headers, json=body)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_the_client_raises_each_codes_class(code: ErrorCode) -> None:
    with (
        WanderClient("http://t", transport=answering(code.status, code), retry=NO_RETRY) as wander,
        pytest.raises(WanderAPIError) as raised,
    ):
        wander.runs()
    expected = ERRORS_BY_CODE[code]
    if code is ErrorCode.HTTP_ERROR:  # it says only "an HTTP error": typed by its status
        expected = ERRORS_BY_STATUS[code.status]
    assert type(raised.value) is expected
    assert raised.value.code is code and raised.value.status == code.status


@pytest.mark.parametrize(
    ("status", "expected"),
    [(503, ERRORS_BY_STATUS[503]), (404, ERRORS_BY_STATUS[404]), (418, WanderAPIError)],
)
def test_an_unknown_code_gets_the_class_of_its_status(status: int, expected: type) -> None:
    transport = answering(status, "brand_new")
    with (
        WanderClient("http://t", transport=transport, retry=NO_RETRY) as wander,
        pytest.raises(WanderAPIError) as raised,
    ):
        wander.runs()
    assert type(raised.value) is expected
    assert (raised.value.status, raised.value.code) == (status, "brand_new")


class Counting(httpx.MockTransport):
    def __init__(self, status: int, code: str | None) -> None:
        inner = answering(status, code)
        self.sent = 0

        def count(request: httpx.Request) -> httpx.Response:
            self.sent += 1
            return inner.handle_request(request)

        super().__init__(count)


@pytest.mark.parametrize("method", ["create", "score"])  # one not idempotent, one idempotent
@pytest.mark.parametrize("code", list(ErrorCode))
def test_the_client_retries_exactly_the_retryable_codes(code: ErrorCode, method: str) -> None:
    transport = Counting(code.status, code)
    with (
        WanderClient("http://t", transport=transport, retry=FAST) as wander,
        pytest.raises(ERRORS_BY_CODE[code]),
    ):
        wander.create("tictactoe") if method == "create" else wander.score("ep_1")
    assert transport.sent == (FAST.attempts if code.retryable else 1)


@pytest.mark.parametrize(
    ("status", "code", "method", "sent"),
    [
        (502, None, "score", FAST.attempts),  # a proxy's: safe to resend a read
        (502, None, "create", 1),  # but a create may have been applied
        (503, None, "create", FAST.attempts),  # a 503 applied nothing
        (503, "brand_new", "create", FAST.attempts),  # a newer service's 503 too
        (409, "brand_new", "score", 1),
        (500, None, "score", 1),
    ],
)
async def test_answers_without_a_known_code_are_retried_by_their_status(
    status: int, code: str | None, method: str, sent: int
) -> None:
    transport = Counting(status, code)
    async with AsyncWanderClient("http://t", transport=transport, retry=FAST) as wander:
        with pytest.raises(WanderAPIError):
            await (wander.create("tictactoe") if method == "create" else wander.score("ep_1"))
    assert transport.sent == sent
