"""notifications: when each slot's notification went out (NULL while it is being sent)

Revision ID: 0006_notification_sent
Revises: 0005_notify
Create Date: 2026-12-05 09:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0006_notification_sent"
down_revision = "0005_notify"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sent_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    # A slot kept before now was a notification sent: failed ones gave theirs back.
    op.execute("UPDATE notifications SET sent_at = created_at")


def downgrade() -> None:
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.drop_column("sent_at")
