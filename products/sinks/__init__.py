"""Sinks: after a job's parts are committed, its rows are loaded into the user's vector store
(pgvector, LanceDB, Qdrant; an in-process one for tests) and kept in sync on every reindex."""
