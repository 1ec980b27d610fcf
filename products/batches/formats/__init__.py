"""Batch request and output lines per OpenAI endpoint (embeddings, scores), and the table of endpoints."""
