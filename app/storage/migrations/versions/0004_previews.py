"""attachments, previews, and the content-addressed blobs they keep

Revision ID: 0004_previews
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004_previews"
down_revision = "0003_durability_and_tools"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("ws_id", sa.String(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("ws_id", "sha256"),
    )
    op.create_table(
        "attachments",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("ws_id", sa.String(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=200), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_attachments_ws_id", "attachments", ["ws_id"])
    op.create_table(
        "previews",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("ws_id", sa.String(length=32), sa.ForeignKey("workstreams.id"), nullable=False),
        sa.Column("call_id", sa.String(length=200), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("media_type", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("signing_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_previews_ws_id", "previews", ["ws_id"])


def downgrade() -> None:
    op.drop_index("ix_previews_ws_id", table_name="previews")
    op.drop_table("previews")
    op.drop_index("ix_attachments_ws_id", table_name="attachments")
    op.drop_table("attachments")
    op.drop_table("blobs")
