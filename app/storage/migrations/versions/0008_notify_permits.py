"""notify_permits: whose workstreams may notify a user by name, besides the user's own

Revision ID: 0008_notify_permits
Revises: 0007_sandbox_network
Create Date: 2026-12-05 16:20:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0008_notify_permits"
down_revision = "0007_sandbox_network"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notify_permits",
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("sender_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["sender_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("user_id", "sender_id"),
    )


def downgrade() -> None:
    op.drop_table("notify_permits")
