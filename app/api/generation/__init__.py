"""The one generation loop: a request planned into the engine's requests, its chunks handed to a presenter."""
