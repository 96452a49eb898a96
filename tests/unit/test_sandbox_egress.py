"""The egress proxy's pure pieces: the allow-list match and what the jail builder is given."""

from __future__ import annotations

import sys

from app.sandbox.egress import domain_allowed
from app.sandbox.relay import egress_for


def test_a_domain_matches_itself_and_its_subdomains_only():
    domains = ("example.com", "pypi.org")
    assert domain_allowed("example.com", domains)
    assert domain_allowed("API.Example.com.", domains)
    assert domain_allowed("files.pypi.org", domains)
    assert not domain_allowed("evilexample.com", domains)
    assert not domain_allowed("example.com.evil.net", domains)
    assert not domain_allowed("127.0.0.1", domains)


def test_no_allow_list_leaves_every_name_to_the_address_guard():
    assert domain_allowed("anything.invalid", ())


def test_egress_for_runs_the_relay_before_the_command_and_points_every_client_at_it():
    egress = egress_for("/run/egress.sock", 3999, "/usr/bin/python3")
    assert egress.argv_prefix[:3] == ("/usr/bin/python3", "-I", "-c")
    assert egress.argv_prefix[-3:] == ("/run/egress.sock", "3999", "--")
    assert "import app" not in egress.argv_prefix[3] and "from app" not in egress.argv_prefix[3]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        assert egress.env[name] == "http://127.0.0.1:3999"
    assert egress.env["NO_PROXY"] == "localhost,127.0.0.1"
    assert egress_for("/s", 1).argv_prefix[0] == sys.executable
