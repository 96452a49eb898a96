"""Memories: notes the agent keeps across conversations, what is relevant to a message, whose they are."""
