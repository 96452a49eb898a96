"""tool_calls.verdict: the intent judge's verdict on a call that needed a person (risk, reason,
confidence, by); workstreams.smart_approve: its low-risk calls need no person (app/judge);
workstreams.notify_approvals: its waiting calls are pushed to its owner (app/approval_links.py)

Revision ID: 0019_call_verdicts
Revises: 0018_answering_model
Create Date: 2026-12-06 08:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_call_verdicts"
down_revision = "0018_answering_model"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("verdict", sa.JSON(), nullable=True))
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        # A constant default, not sa.false(): SQLite adds it with ALTER TABLE instead of rebuilding
        # the table (which other tables' keys point at).
        batch_op.add_column(sa.Column("smart_approve", sa.Boolean(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("notify_approvals", sa.Boolean(), nullable=False, server_default="0"))


def downgrade() -> None:
    # In place: a batch copy would drop what refers to these tables.
    op.drop_column("workstreams", "notify_approvals")
    op.drop_column("workstreams", "smart_approve")
    op.drop_column("tool_calls", "verdict")
