"""What the server tells its operator: Prometheus metrics, request logs, and per-request figures."""
