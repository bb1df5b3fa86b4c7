"""Speculative decoding's drafters: a choice's history and n-gram drafts, or a smaller model's."""
