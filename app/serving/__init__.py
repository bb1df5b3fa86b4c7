"""gunicorn's multi-worker plumbing: the shared peer table, relaying between workers, hang-up watching."""
