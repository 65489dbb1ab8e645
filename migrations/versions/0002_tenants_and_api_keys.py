"""Tenants: the tenant of each archived episode, and the API keys table.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Episodes archived before tenants existed belong to none (an open service's).
    op.add_column("episodes", sa.Column("tenant", sa.String(length=64), nullable=True))
    op.create_index(
        "ix_episodes_tenant_run_created", "episodes", ["tenant", "run", "created_at", "id"]
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("quotas", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_api_keys_hash", "api_keys", ["hash"], unique=True)


def downgrade() -> None:
    op.drop_table("api_keys")
    # Batch mode: SQLite rebuilds the table without the column.
    with op.batch_alter_table("episodes") as episodes:
        episodes.drop_index("ix_episodes_tenant_run_created")
        episodes.drop_column("tenant")
