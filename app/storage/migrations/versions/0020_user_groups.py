"""users.groups: the groups a user belongs to (names); tool_policies.group_name: a rule for the
members of one group (app/policies, docs/policies.md)

Revision ID: 0020_user_groups
Revises: 0019_call_verdicts
Create Date: 2026-12-06 09:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0020_user_groups"
down_revision = "0019_call_verdicts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("groups", sa.JSON(), nullable=True))  # None: no groups
    with op.batch_alter_table("tool_policies", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("group_name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)
        )
    op.create_index("ix_tool_policies_group_name", "tool_policies", ["group_name"])


def downgrade() -> None:
    # In place: a batch copy would drop what refers to these tables.
    op.drop_index("ix_tool_policies_group_name", table_name="tool_policies")
    op.drop_column("tool_policies", "group_name")
    op.drop_column("users", "groups")
