"""Models loaded on demand, for operators: llama-server's /models/load and /models/unload."""
