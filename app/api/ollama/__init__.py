"""Ollama's API (`/api/*`) over the same engine, keys, limits and metrics, for tools that speak only it."""
