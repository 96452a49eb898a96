"""Built-in tools: one JSON schema file (`schemas/`) and one handler module per tool of the
spec, here (`bash`, `read_file`, ... `task_agent`), and what they share:

- `core/`: what every call goes through: the context and result types, the registry and the
  toolset a step sees, preparing and executing a call, ordering, truncation and redaction.
- `commands/`: what running commands needs (bash, watch): scripts on disk, a scrubbed
  environment, the watchdog that stops a dead worker's commands.
- `files/`: what the file tools share: paths and where they may reach, diffs, replacements,
  images.
- `web/`: what the tools that reach the web share: the guarded fetcher, web_search's backends.
"""
