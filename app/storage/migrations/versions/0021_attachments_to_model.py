"""Attachments reach the model: turns.attachments and messages.attachments (what a message was
sent with); attachments.text, pages, text_note (a PDF's text) and description (an image told in
words for a model that cannot see it) (app/attachments, docs/attachments.md)

Revision ID: 0021_attachments_to_model
Revises: 0020_user_groups
Create Date: 2026-12-06 12:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0021_attachments_to_model"
down_revision = "0020_user_groups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable columns without defaults: SQLite adds them in place, no batch copy.
    op.add_column("turns", sa.Column("attachments", sa.JSON(), nullable=True))
    op.add_column("messages", sa.Column("attachments", sa.JSON(), nullable=True))
    op.add_column("attachments", sa.Column("text", sa.Text(), nullable=True))
    op.add_column("attachments", sa.Column("pages", sa.Integer(), nullable=True))
    op.add_column(
        "attachments", sa.Column("text_note", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
    )
    op.add_column("attachments", sa.Column("description", sa.Text(), nullable=True))


def downgrade() -> None:
    for column in ("description", "text_note", "pages", "text"):
        op.drop_column("attachments", column)
    op.drop_column("messages", "attachments")
    op.drop_column("turns", "attachments")
