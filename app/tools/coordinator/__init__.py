"""The coordinator kind's tools (TOOLS-SPEC.md's `coordinator: true`): one handler module per tool,
each a thin layer over `ToolContext.coordination` (app/coordination/reach.py)."""
