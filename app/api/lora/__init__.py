"""LoRA adapters loaded and unloaded at run time: vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter."""
