"""The SQL archive of finished episodes (DESIGN §6), and the API keys kept beside it."""

from wander.service.archive.database import Archive, EpisodeFilter, RecordRefused, WriteRefused
from wander.service.archive.keys import KeyBook, StoredKey

__all__ = ["Archive", "EpisodeFilter", "KeyBook", "RecordRefused", "StoredKey", "WriteRefused"]
