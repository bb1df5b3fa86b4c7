"""MCP servers the server itself calls for a request's tools: its client, on the worker's event loop."""
