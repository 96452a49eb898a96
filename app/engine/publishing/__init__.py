"""Events out of the engine: after the commit and in commit order (the outbox), and coalesced
streaming."""
