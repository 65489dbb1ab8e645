"""Alembic migrations of the archive (run with ``wander db upgrade``)."""
