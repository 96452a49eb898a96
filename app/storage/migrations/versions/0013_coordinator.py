"""coordinator: workstreams.closed_at (a closed workstream takes no more messages),
coordinator_tasks (a coordinator's persisted task list), background_shells and shell_chunks
(bash run_in_background: the shells and their stored output)

Revision ID: 0013_coordinator
Revises: 0011_compaction_usage
Create Date: 2026-12-06 00:45:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0013_coordinator"
down_revision = "0012_runs"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("closed_at", _time(), nullable=True))
    op.create_table(
        "coordinator_tasks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("ws_id", _text(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("status", _text(length=16), nullable=False),
        sa.Column("child_ws_id", _text(length=32), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("updated_at", _time(), nullable=False),
    )
    op.create_index("ix_coordinator_tasks_ws_id", "coordinator_tasks", ["ws_id"])
    op.create_table(
        "background_shells",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("ws_id", _text(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("status", _text(length=16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("kill_requested", sa.Boolean(), nullable=False),
        sa.Column("read_through", sa.Integer(), nullable=False),
        sa.Column("stored_chars", sa.Integer(), nullable=False),
        sa.Column("dropped_chars", sa.Integer(), nullable=False),
        sa.Column("started_at", _time(), nullable=False),
        sa.Column("heartbeat_at", _time(), nullable=False),
        sa.Column("last_read_at", _time(), nullable=False),
        sa.Column("ended_at", _time(), nullable=True),
    )
    op.create_index("ix_background_shells_ws_id", "background_shells", ["ws_id"])
    op.create_table(
        "shell_chunks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("shell_id", _text(length=32), sa.ForeignKey("background_shells.id"), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
    )
    op.create_index("ix_shell_chunks_shell_id", "shell_chunks", ["shell_id"])


def downgrade() -> None:
    op.drop_index("ix_shell_chunks_shell_id", table_name="shell_chunks")
    op.drop_table("shell_chunks")
    op.drop_index("ix_background_shells_ws_id", table_name="background_shells")
    op.drop_table("background_shells")
    op.drop_index("ix_coordinator_tasks_ws_id", table_name="coordinator_tasks")
    op.drop_table("coordinator_tasks")
    op.drop_column("workstreams", "closed_at")  # not a batch: SQLite would rebuild a referenced table
