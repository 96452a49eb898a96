"""`turnstone-jobs chat`'s flags for a new workstream become the create request's fields."""

import argparse

from turnstone_jobs import commandline


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commandline.add_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(["chat", *argv])


def test_coordinator_flag_asks_for_a_coordinator_workstream():
    assert commandline.new_options(parsed("--coordinator")) == {"kind": "coordinator"}
    assert commandline.new_options(parsed("--coordinator", "--skip-permissions")) == {
        "kind": "coordinator",
        "auto_approve": True,
    }
    assert "kind" not in commandline.new_options(parsed())
