"""The agent engine: turns, model steps, tool batches, approvals, cancel, recovery."""
