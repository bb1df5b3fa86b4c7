"""Background responses' events, kept in order for polling and resuming a stream.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "response_events",
        sa.Column("response_id", sa.String(80), primary_key=True),
        sa.Column("sequence_number", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("event", Document, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("response_events")
