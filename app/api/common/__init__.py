"""What every API family shares: body parsing, fields, SSE framing, errors, tools, the generation loop."""
