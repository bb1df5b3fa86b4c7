"""gunicorn's workers: start-up, routing between them, models on demand, sleep, load and races."""
