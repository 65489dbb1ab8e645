"""Errors of the episode engine, each with the stable ``code`` of the API's error shape.

The engine raises these without knowing about HTTP; the API layer maps each code
to a status (``service.api.errors``).
"""

from __future__ import annotations

from typing import Any


class WanderError(Exception):
    """Base of the errors a client can cause or must handle; ``code`` is in the API contract."""

    code = "bad_request"

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(WanderError):
    """Input that is well-formed JSON but not acceptable; ``details`` are field errors."""

    code = "validation_error"


class Unauthorized(WanderError):
    """No key, or one the service does not know: the message says whether a key came,
    never whether a key that came is unknown or revoked."""

    code = "unauthorized"


class Forbidden(WanderError):
    """A known key whose role may not call the route."""

    code = "forbidden"


class RateLimited(WanderError):
    """The key sent more requests than its rate allows; ``retry_after`` says when the
    next one will be taken (seconds)."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, {"retry_after": retry_after})
        self.retry_after = retry_after


class QuotaExceeded(WanderError):
    """The request would take the tenant past a quota of its key (live episodes, metadata,
    group or batch size). 429 like ``rate_limited``, without ``Retry-After``: waiting
    does not help, finishing or deleting episodes (or a smaller request) does."""

    code = "quota_exceeded"


class EnvNotFound(WanderError):
    code = "env_not_found"


class EpisodeNotFound(WanderError):
    code = "episode_not_found"


class TurnMismatch(WanderError):
    code = "turn_mismatch"


class EpisodeDone(WanderError):
    code = "episode_done"


class EpisodeNotDone(WanderError):
    code = "episode_not_done"


class PayloadTooLarge(WanderError):
    code = "payload_too_large"


class StoreUnavailable(WanderError):
    """The episode store cannot be reached; the request may be retried."""

    code = "store_unavailable"


class RunNotFound(WanderError):
    code = "run_not_found"


class KeyNotFound(WanderError):
    """No API key has that id (``/v1/admin/keys/{key_id}``)."""

    code = "key_not_found"


class DatabaseUnavailable(WanderError):
    """The archive database cannot be reached; the request may be retried."""

    code = "database_unavailable"


class ArchiveStalled(WanderError):
    """Every attempt to archive has failed for a while, though the database answers."""

    code = "archive_stalled"


class EnvCallFailed(WanderError):
    """An environment call that the sandbox stopped: the step is not applied, and is not
    retried on a fresh read either (it would fail the same way)."""


class EnvTimeout(EnvCallFailed):
    """An environment call ran past its deadline (``WANDER_ENV_CALL_SECONDS``); its worker
    was killed and replaced. 422, not a 5xx: the call is a pure function of the episode and
    the action, so a retry of the same step would time out again (clients retry 5xx)."""

    code = "env_timeout"


class EnvFailed(EnvCallFailed):
    """An environment's worker process died during the call (past its memory budget, or
    killed); it was replaced. 422 like ``env_timeout``: memory use is a function of the
    input too, and retrying the same step would fail the same way."""

    code = "env_failed"


class EnvBusy(EnvCallFailed):
    """Every environment worker stayed busy for ``WANDER_ENV_WAIT_SECONDS``: the call was
    never started. 503 with ``Retry-After``, unlike the other two: it says nothing about
    the action, and the same step may well succeed a moment later (clients retry it)."""

    code = "env_busy"


class EnvError(EnvCallFailed):
    """An environment raised an exception during the call (input it does not handle, or
    a bug of its own); nothing was applied. 422 like ``env_timeout``: the call is a pure
    function of the episode and the action, so the same step would raise again. The
    message names the exception's class only: its text may quote the hidden answer."""

    code = "env_error"
