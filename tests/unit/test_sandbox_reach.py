"""What no tool may reach: the service's own files are named from its settings."""

from __future__ import annotations

import os

from app.sandbox import reach
from app.settings import Settings


def test_the_sqlite_database_and_its_journals_config_and_data_root_are_never_reachable(tmp_path):
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/db/service.db",
        "TURNSTONE_CONFIG": str(tmp_path / "conf" / "config.toml"),
        "TURNSTONE_DATA_ROOT": str(tmp_path / "data"),
    }
    hidden = reach.never_reachable(Settings.from_mapping({}, env))
    for path in ("db/service.db", "db/service.db-wal", "db/service.db-shm", "conf/config.toml", "data"):
        assert os.path.realpath(tmp_path / path) in hidden
    assert "/proc" in hidden and "/etc/shadow" in hidden


def test_a_server_database_has_no_file_to_hide():
    assert reach.database_file("postgresql+psycopg://u@127.0.0.1:5432/test") is None
    assert reach.database_file("sqlite://") is None
    assert reach.database_file("sqlite:///relative.db") == os.path.abspath("relative.db")


def test_within_is_by_whole_path_components():
    assert reach.is_within("/srv/data/alice/ws1", "/srv/data")
    assert reach.is_within("/srv/data", "/srv/data")
    assert not reach.is_within("/srv/database", "/srv/data")
