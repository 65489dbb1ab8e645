"""Create the episodes table.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "episodes",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("env_version", sa.String(length=64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("split", sa.String(length=64), nullable=False),
        sa.Column("example", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("group_id", sa.String(length=64), nullable=False),
        sa.Column("run", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("step_rewards", sa.JSON(), nullable=False),
        sa.Column("total_reward", sa.Float(), nullable=False),
        sa.Column("components", sa.JSON(), nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_episodes_group_id", "episodes", ["group_id"])
    op.create_index("ix_episodes_run_created", "episodes", ["run", "created_at", "id"])
    op.create_index("ix_episodes_run_outcome", "episodes", ["run", "outcome"])
    op.create_index("ix_episodes_run_reward", "episodes", ["run", "total_reward"])
    op.create_index("ix_episodes_env_created", "episodes", ["env", "created_at"])


def downgrade() -> None:
    op.drop_table("episodes")
