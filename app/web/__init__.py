"""The web tier: the JSON job API, the websocket relay, health and OpenAPI."""
