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
    # Plain ADD COLUMN and CREATE INDEX: a batch would copy `workstreams` on SQLite, and the
    # drop of the old table fails once messages and turns refer to it (foreign keys on).
    op.add_column("workstreams", sa.Column("parent_turn_id", sa.String(length=32), nullable=True))
    op.add_column("workstreams", sa.Column("parent_call_id", sa.String(length=200), nullable=True))
    op.add_column("workstreams", sa.Column("parent_call_row", sa.Integer(), nullable=True))
    op.add_column("workstreams", sa.Column("task_output", sa.Text(), nullable=True))
    op.add_column(
        "workstreams", sa.Column("task_is_error", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_index("ix_workstreams_parent_id", "workstreams", ["parent_id"])
    op.create_index("ix_workstreams_parent_turn_id", "workstreams", ["parent_turn_id"])
    op.create_index("uq_workstreams_parent_call_row", "workstreams", ["parent_call_row"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_workstreams_parent_call_row", table_name="workstreams")
    op.drop_index("ix_workstreams_parent_turn_id", table_name="workstreams")
    op.drop_index("ix_workstreams_parent_id", table_name="workstreams")
    with op.batch_alter_table("workstreams", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("task_is_error")
        batch_op.drop_column("task_output")
        batch_op.drop_column("parent_call_row")
        batch_op.drop_column("parent_call_id")
        batch_op.drop_column("parent_turn_id")
