"""The SQL archive of finished episodes (DESIGN §6)."""

from wander.service.archive.database import Archive, EpisodeFilter

__all__ = ["Archive", "EpisodeFilter"]
