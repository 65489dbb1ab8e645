"""The SQL archive of finished episodes and the API keys kept beside it.

How it is fed and what it refuses: docs/architecture.md, "The archive".
"""

from wander.service.archive.database import Archive, EpisodeFilter, RecordRefused, WriteRefused
from wander.service.archive.keys import KeyBook, StoredKey

__all__ = ["Archive", "EpisodeFilter", "KeyBook", "RecordRefused", "StoredKey", "WriteRefused"]
