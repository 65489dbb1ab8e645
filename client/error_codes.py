"""The API's error codes: one table of each ``code``, its HTTP status, whether a client
may retry it, and what it means.

The service raises and answers with these (``service.errors``, ``service.api.errors``,
the HTTP edge), the client types and retries its errors by them (``client.errors``,
``client.retry``), and the OpenAPI document lists them (``ErrorInfo.code``), so a code
added here is added everywhere; ``tests/test_error_table.py`` fails on one added
anywhere else alone. The service imports this module (pyproject.toml, import-linter):
it imports nothing, so the client's layer stays below the service's.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """A code of the API's error shape, ``{"error": {"code", "message", "details"}}``.

    ``retryable``: the service applied nothing and the same request may succeed a
    moment later, so a client resends it, even one that is not idempotent (a create).
    ``http_error`` keeps whatever status the framework raised; its ``status`` is the
    usual one.
    """

    _value_: str
    status: int
    retryable: bool
    meaning: str

    def __new__(cls, value: str, status: int, retryable: bool, meaning: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.retryable = retryable
        member.meaning = meaning
        return member

    BAD_REQUEST = "bad_request", 400, False, "the body is not JSON, or not sent as JSON"
    UNAUTHORIZED = "unauthorized", 401, False, "no key, or one the service does not know"
    FORBIDDEN = "forbidden", 403, False, "the key's role may not call the route"
    ENV_NOT_FOUND = "env_not_found", 404, False, "no environment of that name"
    EPISODE_NOT_FOUND = "episode_not_found", 404, False, "no such episode, or it expired"
    RUN_NOT_FOUND = "run_not_found", 404, False, "no archived episode has that run label"
    KEY_NOT_FOUND = "key_not_found", 404, False, "no API key has that id"
    NOT_FOUND = "not_found", 404, False, "no such route"
    METHOD_NOT_ALLOWED = "method_not_allowed", 405, False, "the route takes other methods"
    REQUEST_TIMEOUT = "request_timeout", 408, False, "the request did not arrive in time"
    TURN_MISMATCH = "turn_mismatch", 409, False, "the step's turn is not the episode's"
    EPISODE_DONE = "episode_done", 409, False, "a step on an episode that is done"
    EPISODE_NOT_DONE = "episode_not_done", 409, False, "the score of an unfinished episode"
    PAYLOAD_TOO_LARGE = "payload_too_large", 413, False, "a body or an episode over its limit"
    VALIDATION_ERROR = "validation_error", 422, False, "a field is missing, unknown or invalid"
    ENV_TIMEOUT = "env_timeout", 422, False, "the environment's call ran past its deadline"
    ENV_FAILED = "env_failed", 422, False, "the environment's worker died during the call"
    ENV_ERROR = "env_error", 422, False, "the environment raised during the call"
    ENV_NONDETERMINISTIC = (
        "env_nondeterministic", 422, False, "a replayed episode gave other observations"
    )  # fmt: skip
    RATE_LIMITED = "rate_limited", 429, True, "the key's rate is spent; see Retry-After"
    QUOTA_EXCEEDED = "quota_exceeded", 429, False, "the request would pass a quota of the key"
    HEADERS_TOO_LARGE = "headers_too_large", 431, False, "the request's headers over the limit"
    INTERNAL_ERROR = "internal_error", 500, False, "a bug in the service"
    STORE_UNAVAILABLE = "store_unavailable", 503, True, "the episode store cannot be reached"
    DATABASE_UNAVAILABLE = "database_unavailable", 503, True, "the archive cannot be reached"
    ENV_BUSY = "env_busy", 503, True, "every environment worker stayed busy"
    SERVER_BUSY = "server_busy", 503, True, "the process holds all the connections it may"
    ARCHIVE_STALLED = "archive_stalled", 503, True, "archiving has failed for a while"
    ARCHIVE_BACKLOG = "archive_backlog", 503, True, "the archive's backlog is past its bound"
    STORE_FULL = "store_full", 503, True, "the in-process store holds all the episodes it may"
    HTTP_ERROR = "http_error", 400, False, "another HTTP error raised by the framework"

    @classmethod
    def known(cls, code: str) -> ErrorCode | None:
        """The member for ``code``; None for a code this client does not know (a newer
        service's): a client takes those too, and types them by their status."""
        try:
            return cls(code)
        except ValueError:
            return None
