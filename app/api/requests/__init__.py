"""Typed requests: what a validated body means, as frozen dataclasses that views and planning read."""
