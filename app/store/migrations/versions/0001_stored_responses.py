"""Stored responses: each Response with its input items, owned by an API key's name.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# As the tables declare it today; a migration keeps its own copy so later changes do not rewrite it.
Document = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("previous_response_id", sa.String(80), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("response", Document, nullable=False),
        sa.Column("input_items", Document, nullable=False),
    )
    op.create_index("ix_responses_expires_at", "responses", ["expires_at"])
    op.create_index("ix_responses_owner_created", "responses", ["owner", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_responses_owner_created", table_name="responses")
    op.drop_index("ix_responses_expires_at", table_name="responses")
    op.drop_table("responses")
