"""task sub-agents: a child workstream's parent turn and call, and the answer it gives back

Revision ID: 0004_task_agents
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_task_agents"
down_revision = "0004_tool_search"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_turn_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("parent_call_id", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("parent_call_row", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("task_output", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("task_is_error", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.create_index("ix_workstreams_parent_id", ["parent_id"])
        batch_op.create_index("ix_workstreams_parent_turn_id", ["parent_turn_id"])
        batch_op.create_unique_constraint("uq_workstreams_parent_call_row", ["parent_call_row"])


def downgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.drop_constraint("uq_workstreams_parent_call_row", type_="unique")
        batch_op.drop_index("ix_workstreams_parent_turn_id")
        batch_op.drop_index("ix_workstreams_parent_id")
        batch_op.drop_column("task_is_error")
        batch_op.drop_column("task_output")
        batch_op.drop_column("parent_call_row")
        batch_op.drop_column("parent_call_id")
        batch_op.drop_column("parent_turn_id")
