"""tool_policies: an admin's allow / deny / ask rules for tool calls, everyone's or one user's
(app/policies); tool_calls.policy_rule: the rule that decided or asked for a call, as it read then

Revision ID: 0017_tool_policies
Revises: 0016_workstream_pin_archive
Create Date: 2026-12-06 04:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0017_tool_policies"
down_revision = "0016_workstream_pin_archive"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "tool_policies",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("effect", _text(length=8), nullable=False),
        sa.Column("tool", _text(length=200), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("user_id", _text(length=32), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_by", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_index("ix_tool_policies_user_id", "tool_policies", ["user_id"])
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy_rule", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("tool_calls", "policy_rule")  # in place: a batch copy would drop what refers to it
    op.drop_index("ix_tool_policies_user_id", table_name="tool_policies")
    op.drop_table("tool_policies")
