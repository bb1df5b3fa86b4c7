"""OpenAI's audio transcriptions, answered through chat by a model with an audio projector."""
