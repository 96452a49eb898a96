"""MCP server definitions from config.toml, an mcpServers file and the API: one checker, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.mcp.config import ServerConfigError, parse_json_file, parse_server
from app.settings import Settings, SettingsError


def test_toml_and_json_file_merge_and_the_file_wins(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github": {
                        "command": "npx",
                        "args": ["-y", "srv"],
                        "env": {"GITHUB_TOKEN": "ghp_secret"},
                    },
                    "both": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}},
                }
            }
        )
    )
    config = {"mcp": {"servers": {"both": {"command": "old"}, "local": {"command": "srv", "cwd": "/tmp"}}}}
    settings = Settings.from_mapping(config, {"TURNSTONE_MCP_CONFIG": str(path)})
    servers = settings.mcp_servers
    assert sorted(servers) == ["both", "github", "local"]
    assert servers["both"].transport == "http" and servers["both"].origin == "file"
    assert servers["local"].cwd == "/tmp" and servers["local"].origin == "config"
    assert servers["github"].env == {"GITHUB_TOKEN": "ghp_secret"}
    public = servers["github"].public()
    assert "ghp_secret" not in json.dumps(public) and public["env_keys"] == ["GITHUB_TOKEN"]


@pytest.mark.parametrize(
    ("name", "entry", "field"),
    [
        ("a__b", {"command": "x"}, "name"),
        ("", {"command": "x"}, "name"),
        ("nul\x00", {"command": "x"}, "name"),
        ("x" * 41, {"command": "x"}, "name"),
        (7, {"command": "x"}, "name"),
        ("s", {"type": "smoke", "command": "x"}, "type"),
        ("s", {"type": "stdio"}, "command"),
        ("s", {"command": ""}, "command"),
        ("s", {"command": "a\x00b"}, "command"),
        ("s", {"command": 5}, "command"),
        ("s", {"command": "x", "args": "not a list"}, "args"),
        ("s", {"command": "x", "args": [1, 2]}, "args"),
        ("s", {"command": "x", "args": ["a"] * 500}, "args"),
        ("s", {"command": "x", "env": {"K": 1}}, "env"),
        ("s", {"command": "x", "env": [["K", "v"]]}, "env"),
        ("s", {"type": "http"}, "url"),
        ("s", {"type": "http", "url": "ftp://x"}, "url"),
        ("s", {"type": "http", "url": "https://x", "headers": {"A": {"deep": ["x"]}}}, "headers"),
        ("s", "just a string", "name"),
    ],
)
def test_bad_definitions_name_the_field(name: object, entry: object, field: str) -> None:
    with pytest.raises(ServerConfigError) as caught:
        parse_server(name, entry, "db")
    assert caught.value.field == field


def test_a_bad_file_is_a_start_up_error_naming_the_file_and_server(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"broken": {"type": "http"}}}))
    with pytest.raises(SettingsError, match=r"servers\.json.*broken.*url"):
        Settings.from_mapping({}, {"TURNSTONE_MCP_CONFIG": str(path)})
    path.write_text("{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        Settings.from_mapping({}, {"TURNSTONE_MCP_CONFIG": str(path)})
    with pytest.raises(SettingsError, match="cannot read"):
        Settings.from_mapping({}, {"TURNSTONE_MCP_CONFIG": str(tmp_path / "absent.json")})
    with pytest.raises(SettingsError, match=r"\[mcp.servers\].*a__b"):
        Settings.from_mapping({"mcp": {"servers": {"a__b": {"command": "x"}}}}, {})
    with pytest.raises(ServerConfigError):
        parse_json_file(json.dumps({"servers": {}}), "x.json")


def test_type_is_inferred_and_aliases_accepted() -> None:
    assert parse_server("s", {"url": "http://h/mcp"}, "db").transport == "http"
    assert parse_server("s", {"type": "streamable-http", "url": "http://h/mcp"}, "db").transport == "http"
    assert parse_server("s", {"command": "x"}, "db").transport == "stdio"


def test_run_with_a_bad_mcp_config_stops_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"x__y": {"command": "a"}}}))
    assert main(["run", "--mcp-config", str(path)]) == 2
    assert f"{path}: server name 'x__y'" in capsys.readouterr().err
