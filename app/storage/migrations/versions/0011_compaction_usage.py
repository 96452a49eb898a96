"""messages.covers_from / covers_to / covers_count: a summary message (role "summary") and the
range of the conversation it stands for (app/compaction)

Revision ID: 0011_compaction_usage
Revises: 0010_branches
Create Date: 2026-12-06 00:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_compaction_usage"
down_revision = "0010_branches"
branch_labels = None
depends_on = None

_COLUMNS = ("covers_from", "covers_to", "covers_count")


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        for name in _COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
