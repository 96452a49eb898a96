"""Skills: stored instructions (prompt_templates) a workstream can take on."""
