"""watches: commands polled by beat for a workstream; messages say when a watch wrote them

Revision ID: 0004_watches
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:30:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004_watches"
down_revision = "0004_users"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "watches",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("ws_id", sa.String(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("poll_every", sa.Integer(), nullable=False),
        sa.Column("stop_on", sa.Text(), nullable=True),
        sa.Column("max_polls", sa.Integer(), nullable=False),
        sa.Column("polls", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("next_poll_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("claim_token", sa.String(length=32), nullable=True),
        sa.Column("claimed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("poll_started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("last_output", sa.Text(), nullable=True),
        sa.Column("last_exit_code", sa.Integer(), nullable=True),
        sa.Column("last_polled_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("ended_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    )
    op.create_index("ix_watches_ws_id", "watches", ["ws_id"])
    op.create_index("ix_watches_status", "watches", ["status"])
    op.create_index("ix_watches_next_poll_at", "watches", ["next_poll_at"])
    op.create_index(
        "uq_watches_active_name",
        "watches",
        ["ws_id", "name"],
        unique=True,
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("origin", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("origin")
    op.drop_index("uq_watches_active_name", table_name="watches")
    op.drop_index("ix_watches_next_poll_at", table_name="watches")
    op.drop_index("ix_watches_status", table_name="watches")
    op.drop_index("ix_watches_ws_id", table_name="watches")
    op.drop_table("watches")
