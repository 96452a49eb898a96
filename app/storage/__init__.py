"""Storage: the sqlmodel tables, the engine, and the Alembic migrations."""
