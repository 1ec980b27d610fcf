"""What travels on the lane: a request (inputs and a job's options) and its reply (vectors or
per-input errors). Both are JSON on the Redis lane; vectors travel as base64 float32 bytes."""
from __future__ import annotations

import base64

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from poolq.jobs.spec.job_spec import InlineDocument, InlineInput, JobSpec, LongDocuments, OutputOptions

# Planning's estimate (jobs/planning/shard_cutter.py): the lane bounds requests before anything is tokenized.
CHARS_PER_TOKEN = 4.0
# A job needs an input to be a job; the lane's inputs travel beside the spec, not in it.
_NO_INPUT = InlineInput(documents=[InlineDocument(id="lane", text="")])

LaneInput = str | list[int]  # a text, or the model's token ids (no special tokens)


def estimated_tokens(item: LaneInput) -> int:
    """Tokens an input will cost, before it is tokenized (a token array: its length)."""
    return len(item) if isinstance(item, list) else int(len(item) / CHARS_PER_TOKEN) + 1


class EmbeddingRequest(BaseModel):
    """Embed ``inputs`` as an embed job with this model and these options would embed them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    inputs: list[str] | list[list[int]] = Field(min_length=1)
    dimensions: int | None = Field(None, ge=1)
    long_documents: LongDocuments = Field(default_factory=LongDocuments)
    prompt_name: str | None = None
    prompt: str | None = None

    def job_spec(self) -> JobSpec:
        """The embed job these inputs would be part of: the API checks it as a submission is checked,
        and the worker takes its PoolingParams and long-document policy from it (as EmbedTask does)."""
        return JobSpec(model=self.model, task="embed", input=_NO_INPUT, output=OutputOptions(dimensions=self.dimensions),
                       long_documents=self.long_documents, prompt_name=self.prompt_name, prompt=self.prompt)


class InputError(BaseModel):
    """One input the worker could not embed (the engine's per-record error)."""

    index: int
    code: str
    message: str


class EmbeddingReply(BaseModel):
    """A worker's answer: every input's vector, or the inputs that failed, or why nothing was done."""

    model_config = ConfigDict(extra="forbid")
    vectors_b64: str = ""  # [count, dimensions] little-endian float32, row after row
    count: int = 0
    dimensions: int = 0
    prompt_tokens: int = 0  # tokens the model ran, as a job's usage counts them
    engine: str = ""  # what made the vectors: model files' fingerprint and compute dtype, as in a job's manifest
    errors: list[InputError] = Field(default_factory=list)
    failure: str | None = None  # the worker could not run the request at all (not the inputs' fault)

    @classmethod
    def of_vectors(cls, vectors: np.ndarray, prompt_tokens: int, engine: str) -> "EmbeddingReply":
        rows = np.ascontiguousarray(vectors, dtype="<f4")
        return cls(vectors_b64=base64.b64encode(rows.tobytes()).decode("ascii"), count=rows.shape[0],
                   dimensions=rows.shape[1], prompt_tokens=prompt_tokens, engine=engine)

    def vectors(self) -> np.ndarray:
        """``[count, dimensions]`` float32."""
        flat = np.frombuffer(base64.b64decode(self.vectors_b64), dtype="<f4")
        return flat.reshape(self.count, self.dimensions).astype(np.float32)
