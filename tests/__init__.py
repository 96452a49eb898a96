"""Tests of turnstone-jobs: unit tests need no services, integration tests use the real ones."""
