"""The KV cache beyond one sequence's cells: reuse, context shift, the host and disk tiers, slots."""
