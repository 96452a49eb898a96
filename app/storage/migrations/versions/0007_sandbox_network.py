"""workstreams.network: where a workstream's commands may connect (none, proxy or host)

Revision ID: 0007_sandbox_network
Revises: 0006_notification_sent
Create Date: 2026-12-05 15:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0007_sandbox_network"
down_revision = "0006_notification_sent"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Workstreams from before the sandbox had no network namespace of their own to lose: `none`,
    # the default, is what every existing one gets.
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "network", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False, server_default="none"
            )
        )


def downgrade() -> None:
    # in place (SQLite's DROP COLUMN): a batch copy would drop the table others refer to
    with op.batch_alter_table("workstreams", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("network")
