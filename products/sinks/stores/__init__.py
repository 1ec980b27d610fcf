"""The vector stores a sink loads into: LanceDB, Qdrant, pgvector, and an in-process one for tests."""
