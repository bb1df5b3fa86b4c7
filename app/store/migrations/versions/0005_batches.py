"""Batch jobs (OpenAI's Batch API): the batches and each of their requests with its result.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("endpoint", sa.String(80), nullable=False),
        sa.Column("input_file_id", sa.String(80), nullable=False),
        sa.Column("completion_window", sa.String(20), nullable=False),
        sa.Column("batch", Document, nullable=False),
        sa.Column("lease_owner", sa.String(120), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
    )
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_index("ix_batches_owner_created", "batches", ["owner", "created_at"])
    op.create_table(
        "batch_lines",
        sa.Column(
            "batch_id", sa.String(80), sa.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("line_no", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("custom_id", sa.String(400), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("body", Document, nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("lease_owner", sa.String(120), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.Column("result", Document, nullable=True),
    )
    op.create_index("ix_batch_lines_state", "batch_lines", ["state", "batch_id", "line_no"])


def downgrade() -> None:
    op.drop_index("ix_batch_lines_state", table_name="batch_lines")
    op.drop_table("batch_lines")
    op.drop_index("ix_batches_owner_created", table_name="batches")
    op.drop_index("ix_batches_status", table_name="batches")
    op.drop_table("batches")
