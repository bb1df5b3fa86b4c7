"""llama-server's own completion routes (/completion, /completions, /infill): request, answer, stream."""
