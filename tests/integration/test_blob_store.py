"""Blobs (attachment and preview bytes) are kept once per workstream and content, even when two
identical ones arrive at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlmodel import select

from app.previews import store
from app.storage.database import Database
from app.storage.models import Attachment, Blob, Workstream
from tests.integration.storage import migrated

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Iterator[Database]:
    yield from migrated(request.param, tmp_path)


def test_an_identical_upload_racing_another_is_kept_as_one_blob_not_an_error(db):
    with db.session() as s:
        s.add(Workstream(id="ws1", name="w", working_dir="/tmp"))
    data = b"the same bytes, twice at once"
    outcome: list[object] = []

    def second_upload() -> None:
        try:
            outcome.append(store.add_attachment(db, "ws1", "b.txt", "text/plain", data))
        except Exception as exc:  # what the racing request would have answered with: a 500
            outcome.append(exc)

    # The first upload has written its blob and not yet committed when the second one looks.
    with db.session() as first:
        store._keep(first, "ws1", data)
        racer = threading.Thread(target=second_upload)
        racer.start()
        racer.join(0.5)  # PostgreSQL: it waits on the first one's row; SQLite: on the write lock
    racer.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], Attachment), outcome
    with db.reader() as s:
        assert len(s.exec(select(Blob)).all()) == 1
        assert store.attachment(db, "ws1", outcome[0].id)[1] == data
