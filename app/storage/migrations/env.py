"""Alembic environment: the URL comes from the caller's Config, the schema from app.storage.models."""

from alembic import context
from sqlalchemy import text
from sqlmodel import SQLModel

from app.storage import models  # noqa: F401  (registers the tables on the metadata)
from app.storage.database import make_engine

# Two web nodes may start at once: on PostgreSQL they take turns at this lock.
PG_MIGRATION_LOCK = 7_344_211


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url is not None, "the caller's Config sets sqlalchemy.url"
    engine = make_engine(url)
    with engine.connect() as connection:
        is_pg = connection.dialect.name == "postgresql"
        if is_pg:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK})
            connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=SQLModel.metadata,
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
        finally:
            if is_pg:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK})
                connection.commit()
    engine.dispose()


run_migrations_online()
