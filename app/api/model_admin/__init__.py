"""What operators change on models, as llama-server does: /models/load and /models/unload, /lora-adapters."""
