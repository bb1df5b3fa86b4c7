"""Owners named by a digest of their key: what a key without a name owned under its place in the key list
(`key-N`, `line-N`) moves to the name it has now (`key-<digest>`), once.

The names to move come from the keys configured when this runs (app.store.migrate hands them over
as `owner_renames`): upgrade before removing or reordering keys, as the place still names the same
key then. A database created after this revision has nothing to move.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OWNED = ("responses", "conversations", "files", "batches")


def upgrade() -> None:
    config = op.get_context().config
    renames: dict[str, str] = (config.attributes.get("owner_renames") if config else None) or {}
    for table in OWNED:
        owner = sa.table(table, sa.column("owner", sa.String))
        for legacy, name in renames.items():
            op.execute(sa.update(owner).where(owner.c.owner == legacy).values(owner=name))


def downgrade() -> None:
    """Names by place cannot be made again from digests: nothing moves back."""
