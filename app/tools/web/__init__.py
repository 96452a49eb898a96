"""What the tools that reach the web share: the guarded fetcher and web_search's backends."""
