"""Token usage and its cost: the price table, and usage reports by day, model or user."""
