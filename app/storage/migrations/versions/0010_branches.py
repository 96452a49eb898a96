"""branches: what a rewind took out of a conversation (its messages stay, marked with the
branch's id in messages.branch_id, so that no id is ever used twice); workstreams.history_version,
bumped by each such change, so that a worker's copy of the conversation knows it changed;
workstreams.forked_from / forked_at: where a fork came from

Revision ID: 0010_branches
Revises: 0009_step_failures
Create Date: 2026-12-05 21:45:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0010_branches"
down_revision = "0009_step_failures"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "branches",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("ws_id", _text(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("after_message_id", sa.Integer(), nullable=False),
        sa.Column("reason", _text(length=16), nullable=False),
        sa.Column("created_by", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("preview", sa.Text(), nullable=False),
        sa.Column("idempotency_key", _text(length=200), nullable=True),
    )
    op.create_index("ix_branches_ws_id", "branches", ["ws_id"])
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("forked_from", _text(length=32), nullable=True))
        batch_op.add_column(sa.Column("forked_at", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("history_version", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("branch_id", _text(length=32), nullable=True))
    op.create_index("ix_messages_branch_id", "messages", ["branch_id"])


def downgrade() -> None:
    op.drop_index("ix_messages_branch_id", table_name="messages")
    op.drop_column("messages", "branch_id")
    op.drop_column("workstreams", "history_version")
    op.drop_column("workstreams", "forked_at")
    op.drop_column("workstreams", "forked_from")
    op.drop_table("branches")
