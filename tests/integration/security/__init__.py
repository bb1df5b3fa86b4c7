"""Keys, tenants and limits over every route."""
