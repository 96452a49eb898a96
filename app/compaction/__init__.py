"""Compaction: a workstream's oldest messages replaced, for the model, by a stored summary."""
