"""messages keep the model's reasoning

Revision ID: 0002_message_reasoning
Revises: 6a3da80f0f39
Create Date: 2026-12-02 18:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_message_reasoning"
down_revision = "6a3da80f0f39"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reasoning", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("reasoning")
