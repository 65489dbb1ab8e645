"""SQL tables of the archive (SQLAlchemy 2). The migrations in ``migrations/`` create them;
a test checks that the two never drift apart."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class ArchivedEpisode(Base):
    """One finished (done or aborted) episode, written once however often it is archived."""

    __tablename__ = "episodes"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(String(64))
    """The tenant the episode belongs to; None on a service with no keys."""
    env: Mapped[str] = mapped_column(String(200))
    env_version: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]]
    split: Mapped[str] = mapped_column(String(64))
    example: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    group_id: Mapped[str] = mapped_column(String(64), index=True)
    run: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    turns: Mapped[int] = mapped_column(Integer)
    messages: Mapped[list[Any]]
    step_rewards: Mapped[list[Any]]
    total_reward: Mapped[float] = mapped_column(Float)
    components: Mapped[dict[str, Any]]
    weights: Mapped[dict[str, Any]]
    metrics: Mapped[dict[str, Any]]
    outcome: Mapped[str | None] = mapped_column(String(64))
    """The ``outcome`` of the environment's ``Score``, where it has one: a column to filter on."""
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    state: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    archived_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_episodes_run_created", "run", "created_at", "id"),
        # A tenant's runs: its summaries, listings and exports, in creation order.
        Index("ix_episodes_tenant_run_created", "tenant", "run", "created_at", "id"),
        Index("ix_episodes_run_outcome", "run", "outcome"),
        Index("ix_episodes_run_reward", "run", "total_reward"),
        Index("ix_episodes_env_created", "env", "created_at"),
    )


class ApiKey(Base):
    """One API key: who it acts for and with what rights. The key itself is never stored,
    only its hash (``tenancy.key_hash``), which is how a presented key is found."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    """The public id (``key_...``) that logs, metrics and ``revoke`` name."""
    tenant: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    hash: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(200))
    """A label for people: who holds the key, what for."""
    quotas: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """Overrides of the role's default quotas, by ``Quotas`` field; None: none."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_api_keys_hash", "hash", unique=True),)
