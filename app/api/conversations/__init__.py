"""OpenAI's Conversations API: conversations and their items, kept in the store for any worker or host."""
