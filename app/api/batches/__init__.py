"""`/v1/batches`: batch jobs over uploaded JSONL files, run by every worker when it has room."""
