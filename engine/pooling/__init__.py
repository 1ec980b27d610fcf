"""Pooling = method (which tokens, how combined) x head (what is done to the pooled vector)."""
from .heads import EmbeddingHead
from .methods import PoolingMethod, pooling_method
from .pooler import Pooler

__all__ = ["EmbeddingHead", "Pooler", "PoolingMethod", "pooling_method"]
