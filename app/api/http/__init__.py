"""HTTP plumbing every family shares: the body, errors, SSE framing, field types, the store."""
