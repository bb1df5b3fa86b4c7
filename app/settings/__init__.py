"""The server's settings: every LLM_* variable declared once, parsed, cross-checked and derived."""
