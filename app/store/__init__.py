"""What the server keeps for its clients (stored responses), in SQLite or PostgreSQL through SQLAlchemy."""
