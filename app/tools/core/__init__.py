"""What every tool call goes through: the context and result types, the registry and toolset,
preparing and executing a call, ordering, truncation and redaction."""
