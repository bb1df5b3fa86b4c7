"""Models' own chat formats: which one a template speaks, and its tool calls and reasoning parsed."""
