"""llama-server's slots: `GET /slots` and `POST /slots/{id}?action=save|restore|erase`."""
