"""Prometheus metrics: what is counted where it happens (`definitions`, `recording`), what is read
from the stored state at scrape time (`state`), and how `/metrics` puts them together (`exposition`)."""
