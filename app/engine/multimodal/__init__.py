"""Images and audio: the projector, and each clip encoded beside the batcher as a step needs it."""
