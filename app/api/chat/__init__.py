"""OpenAI's chat completions and text completions: one family, one presenter for both."""
