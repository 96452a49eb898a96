"""Webhooks (docs/webhooks.md): a user's endpoints, the events recorded for them, and their
delivery, signed as the Standard Webhooks specification says and retried for a day."""
