"""turns.step_failures: attempts at the current phase that raised, apart from those whose
worker died (the poison guard counts the first; a worker killed five times is no bug of the step)

Revision ID: 0009_step_failures
Revises: 0008_notify_permits
Create Date: 2026-12-05 16:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_step_failures"
down_revision = "0008_notify_permits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("step_failures", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # in place (SQLite's DROP COLUMN): a batch copy would drop the table others refer to
    op.drop_column("turns", "step_failures")
