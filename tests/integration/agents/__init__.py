"""Coding agents and agent frameworks, run for real against the server."""
