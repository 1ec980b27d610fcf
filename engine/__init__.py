"""poolq's pooling engine: load a local model, schedule by token budget, run, pool."""
from typing import TYPE_CHECKING

from poolq.engine.config import EngineConfig, EngineConfigError
from poolq.engine.loading.registry import DEFAULT_MODEL, ModelRegistry, UnknownModelError
from poolq.engine.long_documents.policy_check import PolicyError, check_multi_task_mode, check_policy
from poolq.engine.model_spec import ModelSpec, ModelSpecError, PoolingType, read_model_spec
from poolq.engine.request import (
    ChunkBoundary,
    ChunkRows,
    ChunkSpan,
    EngineResult,
    LongDocumentMode,
    LongDocumentPolicy,
    MultiOutput,
    PooledData,
    PoolingOutput,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
    SparseVector,
    TruncationSide,
)

if TYPE_CHECKING:  # what __getattr__ loads on first use, as the type checker should see it
    from poolq.engine.engine import EmbeddingError, PoolingEngine

# PoolingEngine pulls in torch; importing the engine's request types or scheduler must not.
_TORCH_EXPORTS = {"PoolingEngine", "EmbeddingError"}


def __getattr__(name: str):
    if name in _TORCH_EXPORTS:
        from poolq.engine import engine as _engine_module

        return getattr(_engine_module, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = [
    "ChunkBoundary",
    "ChunkRows",
    "MultiOutput",
    "PooledData",
    "PolicyError",
    "check_policy",
    "check_multi_task_mode",
    "DEFAULT_MODEL",
    "EmbeddingError",
    "EngineConfig",
    "EngineConfigError",
    "EngineResult",
    "LongDocumentMode",
    "LongDocumentPolicy",
    "ModelRegistry",
    "ModelSpec",
    "ModelSpecError",
    "PoolingEngine",
    "PoolingOutput",
    "PoolingParams",
    "PoolingRequest",
    "PoolingTask",
    "SparseVector",
    "PoolingType",
    "ChunkSpan",
    "RequestError",
    "TruncationSide",
    "UnknownModelError",
    "read_model_spec",
]
