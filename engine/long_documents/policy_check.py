"""Checks of a long-document policy against a model, done once per job or run. No torch here."""
from __future__ import annotations

from poolq.engine.loading.model_spec import ModelSpec, PoolingType
from poolq.engine.request import LongDocumentMode, LongDocumentPolicy


class PolicyError(ValueError):
    """A long-document policy this model cannot follow; ``field`` names the offending option."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def resolve_window(spec: ModelSpec, policy: LongDocumentPolicy) -> int:
    window = policy.window_tokens or spec.window_tokens
    if not 1 <= window <= spec.max_position_tokens:
        raise PolicyError("window_tokens", f"window_tokens={window} is outside 1..{spec.max_position_tokens} for this model")
    return window


def default_overlap(policy: LongDocumentPolicy, window: int) -> int:
    return policy.overlap_tokens if policy.overlap_tokens is not None else window // 4


def check_policy(spec: ModelSpec, policy: LongDocumentPolicy) -> int:
    """Raise :class:`PolicyError` for a policy the model cannot follow; return the window."""
    window = resolve_window(spec, policy)
    mode = policy.mode
    if mode is LongDocumentMode.LATE_CHUNKS and spec.pooling is not PoolingType.MEAN and not policy.allow_any_pooling:
        raise PolicyError(
            "allow_any_pooling",
            f"late chunking mean-pools chunk token states, but this model pools with {spec.pooling.value}: its token "
            "states are not trained to be averaged; set allow_any_pooling to use it anyway",
        )
    if mode is LongDocumentMode.LATE_CHUNKS and default_overlap(policy, window) >= window:
        raise PolicyError("overlap_tokens", f"overlap_tokens={policy.overlap_tokens} must be below the window ({window})")
    if policy.max_embed_len is not None and mode is not LongDocumentMode.CHUNKED and policy.max_embed_len > window:
        raise PolicyError("max_embed_len",
                          f"max_embed_len={policy.max_embed_len} exceeds the window ({window}) outside chunked mode")
    return window
