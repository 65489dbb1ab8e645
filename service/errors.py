"""Errors of the episode engine, each with the stable ``code`` of the API's error shape.

The engine raises these without knowing about HTTP; each code's status, and whether a
client retries it, are in the one table of codes, ``wander.client.error_codes``, which
the API layer answers with (``service.api.errors``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from wander.client.error_codes import ErrorCode


class WanderError(Exception):
    """Base of the errors a client can cause or must handle; ``code`` is in the API contract."""

    code: ClassVar[ErrorCode] = ErrorCode.BAD_REQUEST

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(WanderError):
    """Input that is well-formed JSON but not acceptable; ``details`` are field errors."""

    code = ErrorCode.VALIDATION_ERROR


class Unauthorized(WanderError):
    """No key, or one the service does not know: the message says whether a key came,
    never whether a key that came is unknown or revoked."""

    code = ErrorCode.UNAUTHORIZED


class Forbidden(WanderError):
    """A known key whose role may not call the route."""

    code = ErrorCode.FORBIDDEN


class RateLimited(WanderError):
    """The key sent more requests than its rate allows; ``retry_after`` says when the
    next one will be taken (seconds)."""

    code = ErrorCode.RATE_LIMITED

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, {"retry_after": retry_after})
        self.retry_after = retry_after


class QuotaExceeded(WanderError):
    """The request would take the tenant past a quota of its key (live episodes, metadata,
    group or batch size). 429 like ``rate_limited``, without ``Retry-After``: waiting
    does not help, finishing or deleting episodes (or a smaller request) does."""

    code = ErrorCode.QUOTA_EXCEEDED


class EnvNotFound(WanderError):
    code = ErrorCode.ENV_NOT_FOUND


class EpisodeNotFound(WanderError):
    code = ErrorCode.EPISODE_NOT_FOUND


class TurnMismatch(WanderError):
    code = ErrorCode.TURN_MISMATCH


class EpisodeDone(WanderError):
    code = ErrorCode.EPISODE_DONE


class EpisodeNotDone(WanderError):
    code = ErrorCode.EPISODE_NOT_DONE


class PayloadTooLarge(WanderError):
    code = ErrorCode.PAYLOAD_TOO_LARGE


class StoreUnavailable(WanderError):
    """The episode store cannot be reached; the request may be retried."""

    code = ErrorCode.STORE_UNAVAILABLE


class RunNotFound(WanderError):
    code = ErrorCode.RUN_NOT_FOUND


class KeyNotFound(WanderError):
    """No API key has that id (``/v1/admin/keys/{key_id}``)."""

    code = ErrorCode.KEY_NOT_FOUND


class DatabaseUnavailable(WanderError):
    """The archive database cannot be reached; the request may be retried."""

    code = ErrorCode.DATABASE_UNAVAILABLE


class ArchiveStalled(WanderError):
    """Every attempt to archive has failed for a while, though the database answers."""

    code = ErrorCode.ARCHIVE_STALLED


class ArchiveBacklog(WanderError):
    """More finished episodes wait for the archive than ``WANDER_ARCHIVE_BACKLOG_MAX``:
    new episodes are refused (503, retried) until it drains; steps go on."""

    code = ErrorCode.ARCHIVE_BACKLOG


class StoreFull(WanderError):
    """The in-process store holds ``WANDER_MEMORY_MAX_EPISODES`` episodes: new episodes
    are refused (503, retried) until some finish and are archived; steps go on."""

    code = ErrorCode.STORE_FULL


class EnvCallFailed(WanderError):
    """An environment call that the sandbox stopped: the step is not applied, and is not
    retried on a fresh read either (it would fail the same way)."""


class EnvTimeout(EnvCallFailed):
    """An environment call ran past its deadline (``WANDER_ENV_CALL_SECONDS``); its worker
    was killed and replaced. 422, not a 5xx: the call is a pure function of the episode and
    the action, so a retry of the same step would time out again (clients retry 5xx)."""

    code = ErrorCode.ENV_TIMEOUT


class EnvFailed(EnvCallFailed):
    """An environment's worker process died during the call (past its memory budget, or
    killed); it was replaced. 422 like ``env_timeout``: memory use is a function of the
    input too, and retrying the same step would fail the same way."""

    code = ErrorCode.ENV_FAILED


class EnvBusy(EnvCallFailed):
    """Every environment worker stayed busy for ``WANDER_ENV_WAIT_SECONDS``: the call was
    never started. 503 with ``Retry-After``, unlike the other two: it says nothing about
    the action, and the same step may well succeed a moment later (clients retry it)."""

    code = ErrorCode.ENV_BUSY


class EnvError(EnvCallFailed):
    """An environment raised an exception during the call (input it does not handle, or
    a bug of its own); nothing was applied. 422 like ``env_timeout``: the call is a pure
    function of the episode and the action, so the same step would raise again. The
    message names the exception's class only: its text may quote the hidden answer."""

    code = ErrorCode.ENV_ERROR


class EnvNondeterministic(EnvCallFailed):
    """Replaying a hosted environment's episode (another framework's environment, rebuilt
    from its recorded actions) gave another observation than the one recorded at turn
    ``details["turn"]``: the episode cannot go on, whichever replica steps it."""

    code = ErrorCode.ENV_NONDETERMINISTIC
