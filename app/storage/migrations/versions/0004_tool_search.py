"""tool search: a workstream's own settings, the provider's server blocks kept with a reply

Revision ID: 0004_tool_search
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_tool_search"
down_revision = "0004_previews"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tool_search", sa.JSON(), nullable=True))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("server_blocks", sa.JSON(), nullable=True))


def downgrade() -> None:
    # in place (SQLite's DROP COLUMN): a batch copy would drop tables that others refer to
    with op.batch_alter_table("messages", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("server_blocks")
    with op.batch_alter_table("workstreams", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("tool_search")
