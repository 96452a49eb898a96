"""Sub-agents: a task_agent call's child workstream started (`family`), decisions that reach it,
its events in the parent's stream (`relay`), and its end becoming the parent's result (`fanin`)."""
