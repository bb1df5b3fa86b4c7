"""Conversations and their items (OpenAI's Conversations API).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("metadata", Document, nullable=False),
    )
    op.create_table(
        "conversation_items",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),  # SQLite numbers only INTEGER keys itself
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "conversation_id",
            sa.String(80),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("item_id", sa.String(120), nullable=False),
        sa.Column("item", Document, nullable=False),
    )
    op.create_index("ix_conversation_items_conversation_id", "conversation_items", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_conversation_items_conversation_id", table_name="conversation_items")
    op.drop_table("conversation_items")
    op.drop_table("conversations")
