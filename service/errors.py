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


class DatabaseUnavailable(WanderError):
    """The archive database cannot be reached; the request may be retried."""

    code = "database_unavailable"


class ArchiveStalled(WanderError):
    """Every attempt to archive has failed for a while, though the database answers."""

    code = "archive_stalled"
