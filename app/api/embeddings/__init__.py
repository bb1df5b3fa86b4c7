"""OpenAI's embeddings, from a model served with `embedding: true`."""
