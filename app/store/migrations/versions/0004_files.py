"""Uploaded files (OpenAI's Files API): their facts, and their bytes in 1 MiB chunks.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("filename", sa.String(400), nullable=False),
        sa.Column("purpose", sa.String(40), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_files_expires_at", "files", ["expires_at"])
    op.create_index("ix_files_owner_created", "files", ["owner", "created_at"])
    op.create_table(
        "file_chunks",
        sa.Column("file_id", sa.String(80), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("file_chunks")
    op.drop_index("ix_files_owner_created", table_name="files")
    op.drop_index("ix_files_expires_at", table_name="files")
    op.drop_table("files")
