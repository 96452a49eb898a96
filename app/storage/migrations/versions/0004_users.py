"""users; tokens that belong to a user, carry scopes and expire; workstream owners; who decided

Revision ID: 0004_users
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:30:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004_users"
down_revision = "0004_task_agents"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("disabled_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    # Tokens made before users existed keep user_id NULL: they speak for the operator.
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("user_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("scopes", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="api"))
        batch_op.add_column(sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.create_index("ix_api_tokens_user_id", ["user_id"])
        batch_op.create_foreign_key("fk_api_tokens_user_id_users", "users", ["user_id"], ["id"])
    # Workstreams made before users existed keep owner_id NULL: the operator's, seen by admins.
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_id", sa.String(length=32), nullable=True))
        batch_op.create_index("ix_workstreams_owner_id", ["owner_id"])
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("decided_by_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("decided_via", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_column("decided_via")
        batch_op.drop_column("decided_by_id")
    # DROP COLUMN in place: a batch copy of workstreams would drop the table that messages and
    # turns refer to, which SQLite's foreign keys refuse.
    op.drop_index("ix_workstreams_owner_id", table_name="workstreams")
    with op.batch_alter_table("workstreams", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("owner_id")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_constraint("fk_api_tokens_user_id_users", type_="foreignkey")
        batch_op.drop_index("ix_api_tokens_user_id")
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("expires_at")
        batch_op.drop_column("kind")
        batch_op.drop_column("scopes")
        batch_op.drop_column("user_id")
    op.drop_table("users")
