"""Alembic's entry point: migrations run on the connection app.store.migrate hands over."""

from alembic import context

from app.store.tables import Base

connection = context.config.attributes["connection"]
# Batch mode lets later migrations alter SQLite tables (it copies them), as PostgreSQL alters in place.
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
