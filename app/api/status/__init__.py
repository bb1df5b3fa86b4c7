"""The server's status: the models it serves, its health and each worker's figures."""
