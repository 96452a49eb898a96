"""Recall: full-text search over stored conversations."""
