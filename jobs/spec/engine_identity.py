"""What made a job's vectors: the engine identity a shard commit and the manifest record.

A job's rows come from one identity unless its spec allows mixing (``allow_mixed_engines``): the
first shard to run claims the job's identity (jobs/ledger/engine_claim.py), and a worker whose
engine differs in anything but the dtype leaves the shard to another (``EngineMismatch``,
retryable: docs/engine.md, "One engine per job").
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class EngineMismatch(RuntimeError):
    """This worker's engine is not the one the job's rows come from (other model files, pooling or
    device kind): the shard is left to a worker that has it (retried, a bounded number of times)."""


class EngineIdentity(BaseModel):
    """Model name, its files' fingerprint (``revision``: weights, config and tokenizer), the compute
    dtype, the pooling and head (the model kind: encoder, SPLADE, classifier...), and the device
    kind (``cpu``, ``cuda``: kernels differ, so do the last bits)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    revision: str
    dtype: str
    pooling: str
    head: str
    device: str

    @property
    def key(self) -> str:
        """The short form earlier manifests' ``engines`` list holds: ``sha256:…/bfloat16``."""
        return f"{self.revision}/{self.dtype}"

    def differences(self, other: "EngineIdentity") -> list[str]:
        """The fields in which ``other`` differs, as ``name: ours != theirs``."""
        ours, theirs = self.model_dump(), other.model_dump()
        return [f"{name}: {ours[name]} != {theirs[name]}" for name in ours if ours[name] != theirs[name]]


def device_kind(device: str) -> str:
    """``cuda`` for ``cuda:1``; ``cpu`` for ``cpu``."""
    return device.split(":", 1)[0]
