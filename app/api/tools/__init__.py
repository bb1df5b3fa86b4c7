"""llama-server's /tools: the operator's MCP servers' tools, listed and called by name."""
