"""Built-in tools: one JSON schema file and one handler module per tool, and the registry."""
