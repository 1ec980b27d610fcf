"""The answer of ``POST /v1/jobs/estimate`` (and ``poolq submit --estimate``): what the job would
cost, before it is submitted. Counts are of documents unless they say rows or tokens; every
count past the sample is an extrapolation (``sample`` says how it was made)."""
from __future__ import annotations

from pydantic import BaseModel, Field


class WorkerRate(BaseModel):
    worker: str
    dtype: str
    tokens_per_s: float


class WorkerTime(BaseModel):
    """Time on the compute workers alive now, from the tokens/s each measured on its own shards."""

    workers_alive: int
    measured: list[WorkerRate] = Field(default_factory=list, description="live workers that reported this model")
    worker_seconds: float | None = Field(None, description="tokens / the measured workers' mean tokens/s")
    wall_seconds: float | None = Field(None, description="tokens / the live workers' summed tokens/s (every worker "
                                       "busy on this job; queueing behind other jobs not included)")
    note: str = ""


class Duplicates(BaseModel):
    """Repeated contents (same content_hash) within the input."""

    documents: int = Field(description="documents whose content appeared earlier in the input")
    distinct: int
    rate: float = Field(description="documents / all documents")
    tokens: int = Field(0, description="tokens of those repeats (tokens x rate): what computing each content once saves")
    method: str = Field(description="exact (every hash kept) or hyperloglog (a sketch, about 1.6 % error)")


class Reuse(BaseModel):
    tokens: int = Field(description="tokens already computed for this tenant and these options: no need to run again")
    source: str = Field(description="which reuse index answered ('none': none is wired in, nothing counted)")


class EstimateSample(BaseModel):
    documents: int = Field(description="documents tokenized exactly")
    characters: int
    method: str = "stratified reservoir by character length; tokens scaled by characters within each stratum"
    fraction_read: float = Field(description="share of the input's bytes the streaming pass read (1: all of it)")
    scan_seconds: float
    price_seconds: float


class JobEstimate(BaseModel):
    model: str
    task: str
    long_documents_mode: str
    documents: int = Field(description="valid records (planning's refusals not counted)")
    superseded: int = Field(0, description="input.supersede: records a later object's record with the same id "
                            "replaces (not in documents; the manifest's counts.superseded)")
    characters: int
    tokens: int = Field(description="estimated tokens of the job's documents as the model takes them, every repeat "
                        "counted (the job's usage.tokens + reuse.reused_tokens)")
    computed_tokens: int = Field(description="estimated tokens the workers run: tokens less the repeats (computed once "
                                 "per job) and what is already available for reuse (the job's usage.tokens)")
    document_tokens: int = Field(description="estimated tokens of the whole documents, before any cut")
    rows: int = Field(description="estimated output rows (the manifest's counts.rows): chunk rows in the chunk modes")
    failed: dict[str, int] = Field(default_factory=dict, description="documents that would fail, by error code "
                                   "(document_too_long, chunk_too_long, duplicate_id, invalid_record, ...)")
    truncated: int = Field(description="documents that would be cut to the window")
    chunked: int = Field(description="documents that would take more than one window or make more than one chunk row")
    split: int = Field(description="naive_chunks: documents with a chunk longer than the window, cut into pieces")
    duplicates: Duplicates
    reuse: Reuse
    carries_from: str | None = Field(None, description="incremental_from: the earlier run this job would carry "
                                     "unchanged documents from (it can). Those run nothing, but the estimate reads no "
                                     "baseline: computed_tokens counts them, an upper bound")
    time: WorkerTime
    sample: EstimateSample
