"""The intent judge: a verdict on each call that waits for a person (docs/policies.md)."""
