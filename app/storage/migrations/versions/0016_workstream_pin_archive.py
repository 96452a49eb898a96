"""workstream_pin_archive: workstreams.pinned and archived_at (the web client's sidebar keeps
them on the server, so every browser shows the same list), and name_origin (who named it:
`default` until the user or the titler does; only a default name is replaced by a title)

Revision ID: 0016_workstream_pin_archive
Revises: 0015_call_edits
Create Date: 2026-12-06 04:30:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0016_workstream_pin_archive"
down_revision = "0015_call_edits"
branch_labels = None
depends_on = None

_text = sqlmodel.sql.sqltypes.AutoString
_time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        # a constant default, not sa.false(): SQLite adds it with ALTER TABLE instead of rebuilding
        # the table (which other tables' keys point at)
        batch_op.add_column(sa.Column("pinned", sa.Boolean(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("archived_at", _time(), nullable=True))
        # Existing workstreams had their first exchange already: their names stay as they are.
        batch_op.add_column(sa.Column("name_origin", _text(length=16), nullable=False, server_default="user"))


def downgrade() -> None:
    # not a batch: SQLite would rebuild a referenced table
    op.drop_column("workstreams", "name_origin")
    op.drop_column("workstreams", "archived_at")
    op.drop_column("workstreams", "pinned")
