"""A GGUF file read and checked before llama.cpp loads it: metadata, the entry's needs, the vocabulary."""
