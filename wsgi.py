"""The WSGI entry point gunicorn loads in each worker."""

from app import create_app

app = create_app()
