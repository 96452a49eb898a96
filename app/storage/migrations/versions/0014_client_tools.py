"""jobs from outside, the rest: a workstream's and a run's client tools (their calls wait for
the client's outputs), a run's and a schedule's own webhook endpoint, deliveries found by their
event's key (turn.completed)

Revision ID: 0014_client_tools
Revises: 0013_coordinator
Create Date: 2026-12-06 04:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0014_client_tools"
down_revision = "0013_coordinator"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    # Plain add and drop, not batches: SQLite would rebuild the tables, which others reference.
    op.add_column("workstreams", sa.Column("client_tools", sa.JSON(), nullable=False, server_default="[]"))
    op.add_column("runs", sa.Column("tools", sa.JSON(), nullable=False, server_default="[]"))
    op.add_column("runs", sa.Column("webhook_id", _text(length=32), nullable=True))
    op.add_column("schedules", sa.Column("webhook_id", _text(length=32), nullable=True))
    op.create_index("ix_webhook_deliveries_event_key", "webhook_deliveries", ["event_key"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_event_key", table_name="webhook_deliveries")
    op.drop_column("schedules", "webhook_id")
    op.drop_column("runs", "webhook_id")
    op.drop_column("runs", "tools")
    op.drop_column("workstreams", "client_tools")
