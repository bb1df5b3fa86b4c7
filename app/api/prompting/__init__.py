"""Building the prompt: conversations through the chat template, input items, tools and their grammars."""
