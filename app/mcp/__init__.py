"""MCP servers: their configuration, the client sessions a worker process holds, the catalog
the model sees (`mcp__{server}__{tool}`), and the status workers publish for the web tier."""
