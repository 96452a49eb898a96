"""webhook_deliveries.queued_until: a delivery sent to the workers is not sent again by the sweep
until this passes (app/webhooks/deliveries.py)

Revision ID: 0022_webhook_queued_until
Revises: 0021_attachments_to_model
Create Date: 2026-12-06 12:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_webhook_queued_until"
down_revision = "0021_attachments_to_model"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("webhook_deliveries", sa.Column("queued_until", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("webhook_deliveries", "queued_until")
