"""What an answer may be: grammars, structured outputs, tool-call formats, samplers."""
