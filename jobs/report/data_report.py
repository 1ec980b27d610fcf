"""A job's data report (manifest ``report``, the results route, ``poolq results JOB --report``):
how long the documents were, how many were cut, split, chunked or failed and why, the chunk
lengths, and how much of the input repeated itself (and was reused)."""
from __future__ import annotations

from pydantic import BaseModel, Field

from poolq.jobs.report.histogram import Histogram

TOP_ERRORS = 5


class ErrorCount(BaseModel):
    code: str
    count: int


class DataReport(BaseModel):
    """Counts are of documents (records), except ``split_chunks`` and the chunk histogram (rows)."""

    documents: int = Field(description="records the shards read: embedded or failed (planning's failures not included)")
    document_tokens: Histogram = Field(description="embedded documents by length in tokens (special tokens included)")
    chunk_tokens: Histogram | None = Field(None, description="chunk modes: chunk rows by their tokens")
    truncated: int = Field(0, description="documents cut to the window (long_documents.mode truncate)")
    chunked: int = Field(0, description="documents that took more than one window or made more than one chunk row")
    split: int = Field(0, description="naive_chunks: documents with a chunk longer than the window, cut into pieces")
    split_chunks: int = Field(0, description="naive_chunks: rows that are such pieces")
    failed: dict[str, int] = Field(default_factory=dict, description="records that failed, by error code (planning's too)")
    top_errors: list[ErrorCount] = Field(default_factory=list, description=f"the {TOP_ERRORS} most frequent error codes")
    distinct_documents: int = Field(0, description="different contents (content_hash) among the shards' records")
    distinct_method: str = Field("exact", description="exact, or hyperloglog (an estimate, about 1.6 % error)")
    duplicate_rate: float = Field(0.0, description="1 - distinct_documents / documents")
    reuse_rate: float | None = Field(None, description="reused_documents / documents, from the manifest's reuse block")

    @staticmethod
    def top(failed: dict[str, int]) -> list[ErrorCount]:
        ranked = sorted(failed.items(), key=lambda item: (-item[1], item[0]))[:TOP_ERRORS]
        return [ErrorCount(code=code, count=count) for code, count in ranked]
