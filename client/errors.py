"""Exceptions of the client, one per error code of the API (docs/api.md#errors).

``ERRORS_BY_CODE`` gives each ``ErrorCode`` its class; a code this client does not know
(a newer service's) is typed by its status, else ``WanderAPIError``.
"""

from __future__ import annotations

from typing import Any

from wander.client.error_codes import ErrorCode


class WanderError(Exception):
    """Base of every error the client raises."""


class WanderConnectionError(WanderError):
    """The service could not be reached (after the retries). The message names the
    URL tried, since a wrong ``WANDER_URL`` is the usual cause; ``url`` and ``reason``
    hold its parts."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the Wander service at {url}: {reason}")
        self.url = url
        self.reason = reason


class PolicyEndpointError(Exception):
    """The model endpoint behind a policy failed: unreachable, an error status, or an
    answer that is not a chat completion. Not a ``WanderError``: the Wander service is
    not at fault, and the message says whose endpoint it was."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"the policy endpoint at {url} {problem}")
        self.url = url


class WanderAPIError(WanderError):
    """The service answered with an error: ``status``, ``code``, ``message``, ``details``.
    ``code`` is an ``ErrorCode``, or a plain ``str`` where this client does not know it
    (a newer service's code, or ``http_<status>`` for an answer without the error shape)."""

    def __init__(
        self, status: int, code: ErrorCode | str, message: str, details: Any = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class BadRequest(WanderAPIError):
    """400 ``bad_request``."""


class Unauthorized(WanderAPIError):
    """401 ``unauthorized``: no key was sent, or the service does not know it (it never
    says which). Pass one as ``api_key=`` or ``WANDER_API_KEY``."""


class Forbidden(WanderAPIError):
    """403 ``forbidden``: the key is known, but its role may not do this (an ``agent``
    key reading runs, a ``trainer`` key managing keys)."""


class NotFound(WanderAPIError):
    """404: an unknown episode, environment, run or route."""


class EpisodeNotFound(NotFound):
    """404 ``episode_not_found``: unknown, or expired after idling."""


class EnvNotFound(NotFound):
    """404 ``env_not_found``."""


class RunNotFound(NotFound):
    """404 ``run_not_found``."""


class KeyNotFound(NotFound):
    """404 ``key_not_found``: no API key has that id (revoking one)."""


class MethodNotAllowed(WanderAPIError):
    """405 ``method_not_allowed``: the route takes other methods (a client older or newer
    than the service)."""


class Conflict(WanderAPIError):
    """409: the episode is not where the request expected it."""


class TurnMismatch(Conflict):
    """409 ``turn_mismatch``; ``details["turn"]`` is the episode's turn."""


class EpisodeDone(Conflict):
    """409 ``episode_done``."""


class EpisodeNotDone(Conflict):
    """409 ``episode_not_done``: ask for a partial score, or finish the episode."""


class PayloadTooLarge(WanderAPIError):
    """413 ``payload_too_large``."""


class InvalidRequest(WanderAPIError):
    """422 ``validation_error``; ``details`` lists the field errors."""


class EnvironmentFailed(InvalidRequest):
    """422 ``env_timeout``, ``env_failed`` or ``env_error``: the environment could not
    answer this call (past its deadline, past its memory, or it raised); nothing was
    applied, and the same action would fail the same way."""


class EnvironmentNondeterministic(EnvironmentFailed):
    """422 ``env_nondeterministic``: a hosted environment (OpenEnv's, Verifiers') replayed
    from its recorded actions gave another observation than the one recorded, at turn
    ``details["turn"]``; the episode cannot go on."""


class RateLimited(WanderAPIError):
    """429 ``rate_limited``: the key sent requests faster than its rate allows. The client
    waits the ``Retry-After`` the service gives and tries again; this is raised once the
    retries are spent."""


class QuotaExceeded(WanderAPIError):
    """429 ``quota_exceeded``: the request would take the key's tenant past a quota (live
    episodes, metadata bytes, group or batch size). Waiting does not help, so the client
    raises it at once: finish or delete episodes, send less, or ask for a larger quota."""


class InternalServerError(WanderAPIError):
    """500 ``internal_error``: a bug in the service (its log has the traceback); not
    retried."""


class ServiceUnavailable(WanderAPIError):
    """503: the store or the database is down, or the service is full; nothing was
    applied, and it is retried before it is raised."""


class EnvBusy(ServiceUnavailable):
    """503 ``env_busy``: every environment worker stayed busy; the call never started."""


class ArchiveStalled(ServiceUnavailable):
    """503 ``archive_stalled``: archiving has failed for a while, though the database
    answers (``/readyz``)."""


class ArchiveBacklog(ServiceUnavailable):
    """503 ``archive_backlog``: more finished episodes wait for the archive than the
    service allows; creating waits (retried with ``Retry-After``), steps go on."""


ERRORS_BY_CODE: dict[ErrorCode, type[WanderAPIError]] = {
    ErrorCode.BAD_REQUEST: BadRequest,
    ErrorCode.UNAUTHORIZED: Unauthorized,
    ErrorCode.FORBIDDEN: Forbidden,
    ErrorCode.ENV_NOT_FOUND: EnvNotFound,
    ErrorCode.EPISODE_NOT_FOUND: EpisodeNotFound,
    ErrorCode.RUN_NOT_FOUND: RunNotFound,
    ErrorCode.KEY_NOT_FOUND: KeyNotFound,
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.METHOD_NOT_ALLOWED: MethodNotAllowed,
    ErrorCode.REQUEST_TIMEOUT: BadRequest,
    ErrorCode.TURN_MISMATCH: TurnMismatch,
    ErrorCode.EPISODE_DONE: EpisodeDone,
    ErrorCode.EPISODE_NOT_DONE: EpisodeNotDone,
    ErrorCode.PAYLOAD_TOO_LARGE: PayloadTooLarge,
    ErrorCode.VALIDATION_ERROR: InvalidRequest,
    ErrorCode.ENV_TIMEOUT: EnvironmentFailed,
    ErrorCode.ENV_FAILED: EnvironmentFailed,
    ErrorCode.ENV_ERROR: EnvironmentFailed,
    ErrorCode.ENV_NONDETERMINISTIC: EnvironmentNondeterministic,
    ErrorCode.RATE_LIMITED: RateLimited,
    ErrorCode.QUOTA_EXCEEDED: QuotaExceeded,
    ErrorCode.HEADERS_TOO_LARGE: PayloadTooLarge,
    ErrorCode.INTERNAL_ERROR: InternalServerError,
    ErrorCode.STORE_UNAVAILABLE: ServiceUnavailable,
    ErrorCode.DATABASE_UNAVAILABLE: ServiceUnavailable,
    ErrorCode.ENV_BUSY: EnvBusy,
    ErrorCode.SERVER_BUSY: ServiceUnavailable,
    ErrorCode.ARCHIVE_STALLED: ArchiveStalled,
    ErrorCode.ARCHIVE_BACKLOG: ArchiveBacklog,
    ErrorCode.STORE_FULL: ServiceUnavailable,
    ErrorCode.HTTP_ERROR: WanderAPIError,  # its status says more: typed by ERRORS_BY_STATUS
}
"""The class of each code; ``tests/test_error_table.py`` checks that none is missing."""
ERRORS_BY_STATUS: dict[int, type[WanderAPIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
    500: InternalServerError,
    503: ServiceUnavailable,
}


def error_from_response(status: int, body: Any, text: str) -> WanderAPIError:
    """The exception for an error response, from its ``{"error": {...}}`` body if it has one."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        code, message, details = error["code"], str(error.get("message", "")), error.get("details")
    else:
        code, message, details = f"http_{status}", text[:500] or "no error message", None
    known = ErrorCode.known(code)
    cls = WanderAPIError if known is None else ERRORS_BY_CODE[known]
    if cls is WanderAPIError:  # a code newer than this client, or ``http_error``
        cls = ERRORS_BY_STATUS.get(status, WanderAPIError)
    return cls(status, known or code, message, details)
