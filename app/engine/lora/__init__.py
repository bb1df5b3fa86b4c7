"""LoRA adapters while the model serves: loaded and freed between steps, scales taking turns."""
