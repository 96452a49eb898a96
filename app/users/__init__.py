"""Users, their API tokens and scopes, and who owns which workstream."""
