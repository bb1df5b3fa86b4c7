"""Which worker serves a request: this one, the one holding its model, or a pool worker loading it first."""
