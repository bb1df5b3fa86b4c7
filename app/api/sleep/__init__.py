"""Start-up models put to sleep and woken by an operator: vLLM's /sleep, /wake_up and /is_sleeping."""
