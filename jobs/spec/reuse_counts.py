"""What content-addressed reuse saved a job (docs/reuse.md): in its manifest and its status."""
from __future__ import annotations

from typing import Iterable, Protocol

from pydantic import BaseModel


class _Counted(Protocol):
    """A shard's commit, as far as reuse counts go."""

    @property
    def tokens(self) -> int: ...
    @property
    def reused_documents(self) -> int: ...
    @property
    def reused_tokens(self) -> int: ...


class ReuseCounts(BaseModel):
    """``reused_documents``: documents whose output was copied (a repeat within the job, or the
    tenant's earlier job); ``reused_tokens``: what computing them would have cost;
    ``computed_tokens``: what the model actually ran (the job's ``usage.tokens``, carried ones aside)."""

    reused_documents: int = 0
    reused_tokens: int = 0
    computed_tokens: int = 0

    @classmethod
    def of(cls, commits: Iterable[_Counted]) -> "ReuseCounts":
        counts = cls()
        for commit in commits:
            counts.reused_documents += commit.reused_documents
            counts.reused_tokens += commit.reused_tokens
            counts.computed_tokens += commit.tokens
        return counts
