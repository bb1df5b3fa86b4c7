"""Anthropic's Messages API over the same engine: content blocks in, a Message or its events out."""
