"""The API families on the real server through their own clients: routes, streams, stored objects,
errors and the OpenAPI document."""
