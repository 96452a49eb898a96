"""notify: the services registry (channel gateways), shared service keys, users' channel links,
and each turn's notification slots

Revision ID: 0005_notify
Revises: 0004_memory_recall_skills
Create Date: 2026-12-03 12:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0005_notify"
down_revision = "0004_memory_recall_skills"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("kind", _text(length=40), nullable=False),
        sa.Column("url", _text(length=500), nullable=False),
        sa.Column("started_at", _time(), nullable=False),
        sa.Column("heartbeat_at", _time(), nullable=False),
    )
    op.create_index("ix_services_kind", "services", ["kind"])
    op.create_index("ix_services_heartbeat_at", "services", ["heartbeat_at"])
    op.create_table(
        "service_keys",
        sa.Column("name", _text(length=40), primary_key=True),
        sa.Column("secret", _text(length=200), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_table(
        "channel_links",
        sa.Column("id", _text(length=32), primary_key=True),
        sa.Column("user_id", _text(length=32), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("channel_type", _text(length=16), nullable=False),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("label", _text(length=200), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
    )
    op.create_index("ix_channel_links_user_id", "channel_links", ["user_id"])
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("turn_id", _text(length=32), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("call_id", _text(length=200), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.UniqueConstraint("turn_id", "slot"),
    )
    op.create_index("ix_notifications_turn_id", "notifications", ["turn_id"])


def downgrade() -> None:
    op.drop_index("ix_notifications_turn_id", table_name="notifications")
    op.drop_table("notifications")
    op.drop_index("ix_channel_links_user_id", table_name="channel_links")
    op.drop_table("channel_links")
    op.drop_table("service_keys")
    op.drop_index("ix_services_heartbeat_at", table_name="services")
    op.drop_index("ix_services_kind", table_name="services")
    op.drop_table("services")
