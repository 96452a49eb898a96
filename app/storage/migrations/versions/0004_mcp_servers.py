"""MCP servers added through the admin API; prompt templates (skills, and MCP prompts synced in)

Revision ID: 0004_mcp_servers
Revises: 0003_durability_and_tools
Create Date: 2026-12-03 09:40:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004_mcp_servers"
down_revision = "0004_watches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=40), primary_key=True),
        sa.Column("transport", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.create_table(
        "prompt_templates",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("category", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("risk_level", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("activation", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("origin", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("mcp_server", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("readonly", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.create_index("ix_prompt_templates_mcp_server", "prompt_templates", ["mcp_server"])


def downgrade() -> None:
    op.drop_index("ix_prompt_templates_mcp_server", table_name="prompt_templates")
    op.drop_table("prompt_templates")
    op.drop_table("mcp_servers")
