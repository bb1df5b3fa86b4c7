"""OpenAI's Files API: uploads kept in the store (for batches, and any client that keeps files)."""
