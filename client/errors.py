"""Exceptions of the client, one per error code of the API (DESIGN §4)."""

from __future__ import annotations

from typing import Any


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
    """The service answered with an error: ``status``, ``code``, ``message``, ``details``."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
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


class RateLimited(WanderAPIError):
    """429 ``rate_limited``: the key sent requests faster than its rate allows. The client
    waits the ``Retry-After`` the service gives and tries again; this is raised once the
    retries are spent."""


class QuotaExceeded(WanderAPIError):
    """429 ``quota_exceeded``: the request would take the key's tenant past a quota (live
    episodes, metadata bytes, group or batch size). Waiting does not help, so the client
    raises it at once: finish or delete episodes, send less, or ask for a larger quota."""


class ServiceUnavailable(WanderAPIError):
    """503: the store or the database is down; retried before it is raised."""


ERRORS_BY_CODE: dict[str, type[WanderAPIError]] = {
    "bad_request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "episode_not_found": EpisodeNotFound,
    "env_not_found": EnvNotFound,
    "run_not_found": RunNotFound,
    "not_found": NotFound,
    "turn_mismatch": TurnMismatch,
    "episode_done": EpisodeDone,
    "episode_not_done": EpisodeNotDone,
    "payload_too_large": PayloadTooLarge,
    "headers_too_large": PayloadTooLarge,
    "request_timeout": BadRequest,
    "validation_error": InvalidRequest,
    "env_timeout": EnvironmentFailed,
    "env_failed": EnvironmentFailed,
    "env_error": EnvironmentFailed,
    "rate_limited": RateLimited,
    "quota_exceeded": QuotaExceeded,
    "store_unavailable": ServiceUnavailable,
    "database_unavailable": ServiceUnavailable,
    "server_busy": ServiceUnavailable,
}
ERRORS_BY_STATUS: dict[int, type[WanderAPIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_from_response(status: int, body: Any, text: str) -> WanderAPIError:
    """The exception for an error response, from its ``{"error": {...}}`` body if it has one."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        code, message, details = error["code"], str(error.get("message", "")), error.get("details")
    else:
        code, message, details = f"http_{status}", text[:500] or "no error message", None
    cls = ERRORS_BY_CODE.get(code) or ERRORS_BY_STATUS.get(status, WanderAPIError)
    return cls(status, code, message, details)
