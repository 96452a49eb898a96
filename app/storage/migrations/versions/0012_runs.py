"""runs: a turn started through the runs API with its contract (policy, deadline, metadata) and,
when the service ended it, why (app/jobs); webhook endpoints and their deliveries
(app/webhooks); schedules and their firings (app/schedules); triggers

Revision ID: 0012_runs
Revises: 0011_compaction_usage
Create Date: 2026-12-06 00:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0012_runs"
down_revision = "0011_compaction_usage"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("ws_id", _text(length=32), nullable=False),
        sa.Column("turn_id", _text(length=32), nullable=True),
        sa.Column("owner_id", _text(length=32), nullable=True),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("timeout_s", sa.Integer(), nullable=True),
        sa.Column("deadline_at", _time(), nullable=True),
        sa.Column("end_reason", _text(length=16), nullable=True),
        sa.Column("end_note", sa.Text(), nullable=True),
        sa.Column("created_by", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("notified_at", _time(), nullable=True),
        sa.Column("signing_key", _text(length=64), nullable=True),
        sa.UniqueConstraint("turn_id"),
    )
    op.create_index("ix_runs_ws_id", "runs", ["ws_id"])
    op.create_index("ix_runs_owner_id", "runs", ["owner_id"])
    op.create_index("ix_runs_deadline_at", "runs", ["deadline_at"])
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("owner_id", _text(length=32), nullable=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", _text(length=100), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("description", _text(length=200), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_index("ix_webhook_endpoints_owner_id", "webhook_endpoints", ["owner_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _text(length=40), primary_key=True),
        sa.Column("endpoint_id", _text(length=32), nullable=False),
        sa.Column("event_type", _text(length=40), nullable=False),
        sa.Column("event_key", _text(length=120), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", _text(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", _time(), nullable=True),
        sa.Column("claimed_until", _time(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("delivered_at", _time(), nullable=True),
        sa.UniqueConstraint("endpoint_id", "event_key"),
    )
    op.create_index("ix_webhook_deliveries_endpoint_id", "webhook_deliveries", ["endpoint_id"])
    op.create_index("ix_webhook_deliveries_status", "webhook_deliveries", ["status"])
    op.create_index("ix_webhook_deliveries_next_attempt_at", "webhook_deliveries", ["next_attempt_at"])
    _schedules()


def _schedules() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("owner_id", _text(length=32), nullable=True),
        sa.Column("cron", _text(length=200), nullable=True),
        sa.Column("every_s", sa.Integer(), nullable=True),
        sa.Column("timezone", _text(length=64), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("ws_id", _text(length=32), nullable=True),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("timeout_s", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_fire_at", _time(), nullable=False),
        sa.Column("created_by", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_index("ix_schedules_owner_id", "schedules", ["owner_id"])
    op.create_index("ix_schedules_next_fire_at", "schedules", ["next_fire_at"])
    op.create_table(
        "schedule_firings",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("schedule_id", _text(length=32), nullable=False),
        sa.Column("fire_at", _time(), nullable=False),
        sa.Column("run_id", _text(length=32), nullable=False),
        sa.Column("started", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.UniqueConstraint("schedule_id", "fire_at"),
    )
    op.create_index("ix_schedule_firings_schedule_id", "schedule_firings", ["schedule_id"])
    op.create_table(
        "triggers",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("owner_id", _text(length=32), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("ws_id", _text(length=32), nullable=True),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("timeout_s", sa.Integer(), nullable=True),
        sa.Column("secret", _text(length=100), nullable=True),
        sa.Column("created_by", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_index("ix_triggers_owner_id", "triggers", ["owner_id"])


def downgrade() -> None:
    op.drop_table("triggers")
    op.drop_table("schedule_firings")
    op.drop_table("schedules")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
    op.drop_table("runs")
