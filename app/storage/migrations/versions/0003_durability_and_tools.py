"""idempotent sends, token usage, tool-call catalog versions and waits, expanded tool sets

Revision ID: 0003_durability_and_tools
Revises: 0002_message_reasoning
Create Date: 2026-12-03 07:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_durability_and_tools"
down_revision = "0002_message_reasoning"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idempotency_key", sa.String(length=200), nullable=True))
        batch_op.create_unique_constraint("uq_turns_ws_id_idempotency_key", ["ws_id", "idempotency_key"])
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("usage", sa.JSON(), nullable=True))
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("catalog_version", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("waiting_on", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("runner", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("process_group", sa.Integer(), nullable=True))
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expanded_tools", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.drop_column("expanded_tools")
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_column("process_group")
        batch_op.drop_column("runner")
        batch_op.drop_column("waiting_on")
        batch_op.drop_column("catalog_version")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("usage")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_constraint("uq_turns_ws_id_idempotency_key", type_="unique")
        batch_op.drop_column("idempotency_key")
