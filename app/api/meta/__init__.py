"""The server describing itself: its models, its health and each worker's figures."""
