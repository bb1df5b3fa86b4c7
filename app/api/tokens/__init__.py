"""Tokens without generating: tokenize, detokenize and tokenizer facts (llama.cpp's and vLLM's routes)."""
