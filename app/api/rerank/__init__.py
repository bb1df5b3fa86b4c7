"""`/v1/rerank`: a reranker's relevance scores of documents for a query (llama-server's shape)."""
