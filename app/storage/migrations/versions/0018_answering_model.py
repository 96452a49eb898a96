"""messages.model: the configured model that gave an answer, the workstream's or, when its server
failed, a fallback's (docs/providers.md, Fallback chains)

Revision ID: 0018_answering_model
Revises: 0017_tool_policies
Create Date: 2026-12-06 05:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0018_answering_model"
down_revision = "0017_tool_policies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "model")  # in place: a batch copy would drop what refers to it
