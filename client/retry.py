"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from wander.client._api import Call
from wander.client.error_codes import ErrorCode

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport errors raised before the request left: resending cannot apply it twice."""
NOT_APPLIED = frozenset({429, 503})
"""For an answer without a code this client knows (a proxy's, or a newer service's):
statuses with which the service says it did nothing. A 429 is worth waiting for only
with ``Retry-After``. An answer with a known code is retried by its ``retryable`` flag
(``ErrorCode``): ``rate_limited`` is, ``quota_exceeded`` is not (the same request would
be refused again until the tenant's episodes end)."""
TRANSIENT = NOT_APPLIED | {502, 504}
"""Statuses worth retrying, without a known code, for requests that are safe to resend."""

_jitter = random.Random()


@dataclass(frozen=True)
class Retry:
    """Exponential backoff with jitter, honouring ``Retry-After``."""

    attempts: int = 5
    backoff_seconds: float = 0.2
    max_backoff_seconds: float = 5.0
    waits: int = 0
    """Attempts beyond ``attempts`` for answers that say how long to wait
    (``Retry-After``): the service is up and asks for time (``archive_backlog``,
    ``rate_limited``), which a long job would rather give than fail (``PATIENT``)."""

    def delay(
        self,
        call: Call[object],
        attempt: int,
        *,
        error: httpx.TransportError | None = None,
        response: httpx.Response | None = None,
    ) -> float | None:
        """Seconds to wait before sending ``call`` again after ``attempt`` (0 for the
        first) failed with ``error`` or ended with ``response``; None: do not."""
        retry_after = response.headers.get("retry-after", "") if response is not None else ""
        told = retry_after.isdigit()
        if attempt + 1 >= self.attempts + (self.waits if told else 0):
            return None
        if error is not None and not (call.idempotent or isinstance(error, NOT_SENT)):
            return None
        if response is not None:
            if not retryable(call, response):
                return None
            if told:
                return min(float(retry_after), self.max_backoff_seconds)
        backoff = min(self.max_backoff_seconds, self.backoff_seconds * 2**attempt)
        return backoff * (0.5 + _jitter.random() / 2)


def retryable(call: Call[object], response: httpx.Response) -> bool:
    """Whether ``response`` to ``call`` is worth sending ``call`` again for: by its code's
    ``retryable`` where the client knows the code, else by its status."""
    status = response.status_code
    if status < 400:
        return False
    code = error_code(response)
    if code is not None:
        return code.retryable
    if status == 429 and not response.headers.get("retry-after"):
        return False
    return status in (TRANSIENT if call.idempotent else NOT_APPLIED)


def error_code(response: httpx.Response) -> ErrorCode | None:
    """The code of an error ``response`` in the API's error shape, if this client knows it."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):  # not JSON, or not an object
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return ErrorCode.known(code) if isinstance(code, str) else None


NO_RETRY = Retry(attempts=1)
PATIENT = Retry(waits=600)
"""A training run's: it waits out ten minutes of a service asking for time (its archive
behind: ``archive_backlog``, with ``Retry-After: 1``) rather than fail an hour of
training, and gives up on the rest as any client does."""
