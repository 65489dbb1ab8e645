"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from wander.client._api import Call

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport errors raised before the request left: resending cannot apply it twice."""
NOT_APPLIED = frozenset({429, 503})
"""Statuses with which the service says it did nothing. A 429 is worth waiting for
only with ``Retry-After`` (``rate_limited``); without it (``quota_exceeded``) the
same request would be refused again until the tenant's episodes end."""
TRANSIENT = NOT_APPLIED | {502, 504}
"""Statuses worth retrying for requests that are safe to resend."""

_jitter = random.Random()


@dataclass(frozen=True)
class Retry:
    """Exponential backoff with jitter, honouring ``Retry-After``."""

    attempts: int = 5
    backoff_seconds: float = 0.2
    max_backoff_seconds: float = 5.0

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
        if attempt + 1 >= self.attempts:
            return None
        if error is not None and not (call.idempotent or isinstance(error, NOT_SENT)):
            return None
        if response is not None:
            if response.status_code not in (TRANSIENT if call.idempotent else NOT_APPLIED):
                return None
            retry_after = response.headers.get("retry-after", "")
            if response.status_code == 429 and not retry_after:
                return None
            if retry_after.isdigit():
                return min(float(retry_after), self.max_backoff_seconds)
        backoff = min(self.max_backoff_seconds, self.backoff_seconds * 2**attempt)
        return backoff * (0.5 + _jitter.random() / 2)


NO_RETRY = Retry(attempts=1)
