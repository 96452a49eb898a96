"""Unit tests: no services, seconds to run."""
