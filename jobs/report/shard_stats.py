"""One shard's contribution to the data report, counted from its engine results as they come,
written beside its part (``JobLayout.attempt_stats``) and merged by the finalizer. Every field
adds up exactly across shards (fixed histogram edges, mergeable distinct counters)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from poolq.engine import EngineResult, RequestError
from poolq.jobs.report.data_report import DataReport
from poolq.jobs.report.distinct_counter import DistinctCounter
from poolq.jobs.report.histogram import Histogram


@dataclass
class ShardStats:
    window: int | None = None  # tokens per model sequence: a document longer was chunked (mode chunked)
    documents: int = 0
    document_tokens: Histogram = field(default_factory=Histogram)
    chunk_tokens: Histogram = field(default_factory=Histogram)
    truncated: int = 0
    chunked: int = 0
    split: int = 0
    split_chunks: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    distinct: DistinctCounter = field(default_factory=DistinctCounter)

    def observe(self, result: EngineResult, content_hash: str) -> None:
        """Count one record's result (``content_hash``: what its output depends on)."""
        self.documents += 1
        self.distinct.add(content_hash)
        if isinstance(result, RequestError):
            self.failed[result.code] += 1
            return
        self.document_tokens.add(result.num_tokens)
        self.truncated += result.truncated
        chunks = result.chunks
        if chunks is None:
            self.chunked += self.window is not None and result.num_tokens > self.window and not result.truncated
            return
        self.chunked += len(chunks) > 1
        self.chunk_tokens.add_all(chunk.token_end - chunk.token_start for chunk in chunks)
        pieces = sum(chunk.split for chunk in chunks)
        self.split += pieces > 0
        self.split_chunks += pieces

    def fail(self, code: str, content_hash: str | None = None) -> None:
        """A record that never reached the engine (a shard given up, a cancel)."""
        self.documents += 1
        self.failed[code] += 1
        if content_hash is not None:
            self.distinct.add(content_hash)

    def merge(self, other: "ShardStats") -> "ShardStats":
        return ShardStats(
            self.window, self.documents + other.documents, self.document_tokens.merge(other.document_tokens),
            self.chunk_tokens.merge(other.chunk_tokens), self.truncated + other.truncated, self.chunked + other.chunked,
            self.split + other.split, self.split_chunks + other.split_chunks, self.failed + other.failed,
            self.distinct.merge(other.distinct),
        )

    def to_json(self) -> dict:
        return {"documents": self.documents, "document_tokens": self.document_tokens.model_dump(),
                "chunk_tokens": self.chunk_tokens.model_dump(), "truncated": self.truncated, "chunked": self.chunked,
                "split": self.split, "split_chunks": self.split_chunks, "failed": dict(self.failed),
                "distinct": self.distinct.to_json()}

    @classmethod
    def from_json(cls, raw: dict) -> "ShardStats":
        return cls(None, raw["documents"], Histogram.model_validate(raw["document_tokens"]),
                   Histogram.model_validate(raw["chunk_tokens"]), raw["truncated"], raw["chunked"], raw["split"],
                   raw["split_chunks"], Counter(raw["failed"]), DistinctCounter.from_json(raw["distinct"]))

    def report(self, plan_failures: dict[str, int] | None = None, reused_documents: int | None = None) -> DataReport:
        """The data report: these counts, planning's failures by code, and the reuse rate."""
        failed = self.failed + Counter(plan_failures or {})
        distinct = self.distinct.count()
        return DataReport(
            documents=self.documents, document_tokens=self.document_tokens,
            chunk_tokens=self.chunk_tokens if self.chunk_tokens.total else None, truncated=self.truncated,
            chunked=self.chunked, split=self.split, split_chunks=self.split_chunks, failed=dict(failed),
            top_errors=DataReport.top(dict(failed)), distinct_documents=distinct.distinct, distinct_method=distinct.method,
            duplicate_rate=max(0.0, 1 - distinct.distinct / self.documents) if self.documents else 0.0,
            reuse_rate=reused_documents / self.documents if reused_documents is not None and self.documents else None,
        )
