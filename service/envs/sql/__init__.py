"""A stateful tool environment: SQL over a per-episode shop database."""

from wander.service.envs.sql.env import Sql, SqlConfig

__all__ = ["Sql", "SqlConfig"]
