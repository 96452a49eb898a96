"""call edits: tool_calls.original_args (the model's arguments, kept when a person changed a
pending call's arguments before approving it; `args` then holds what ran)

Revision ID: 0015_call_edits
Revises: 0014_client_tools
Create Date: 2026-12-06 04:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_call_edits"
down_revision = "0014_client_tools"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("original_args", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_column("original_args")
