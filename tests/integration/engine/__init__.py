"""The engine on the real server: batching, the KV cache and its tiers, memory kinds, speculation,
LoRA, priorities."""
