"""What a decode's logits become: llama.cpp's sampler chain, grammars, thinking budgets, text."""
