"""poolq's pooling engine: load a local model, schedule by token budget, run, pool."""
from .config import EngineConfig, EngineConfigError
from .model_spec import ModelSpec, ModelSpecError, PoolingType, read_model_spec
from .chunking import ChunkBoundary
from .policy_check import PolicyError, check_policy
from .registry import DEFAULT_MODEL, ModelRegistry, UnknownModelError
from .request import (
    EngineResult,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingOutput,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    ChunkSpan,
    RequestError,
    SparseVector,
    TruncationSide,
)

# PoolingEngine pulls in torch; importing the engine's request types or scheduler must not.
_TORCH_EXPORTS = {"PoolingEngine", "EmbeddingError"}


def __getattr__(name: str):
    if name in _TORCH_EXPORTS:
        from . import engine as _engine_module

        return getattr(_engine_module, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = [
    "ChunkBoundary",
    "PolicyError",
    "check_policy",
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
