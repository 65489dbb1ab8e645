"""The SQL archive of finished episodes (DESIGN §6)."""

from wander.service.archive.database import Archive, EpisodeFilter, RecordRefused, WriteRefused

__all__ = ["Archive", "EpisodeFilter", "RecordRefused", "WriteRefused"]
