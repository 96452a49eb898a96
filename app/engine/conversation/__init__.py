"""The conversation the model is sent: the stored history, a worker's cache of it, and the
system prompt."""
