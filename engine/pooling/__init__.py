"""Pooling = method (which tokens, how combined) x head (what is done to the pooled states)."""
from .dispatcher import PoolerDispatcher, UnsupportedTaskError
from .metadata import PoolingMetadata
from .methods import AllPool, PoolingMethod, StepPool, pooling_method
from .pooler import Pooler

__all__ = [
    "AllPool",
    "Pooler",
    "PoolerDispatcher",
    "PoolingMetadata",
    "PoolingMethod",
    "StepPool",
    "UnsupportedTaskError",
    "pooling_method",
]
