"""Pooling = method (which tokens, how combined) x head (what is done to the pooled states)."""
from poolq.engine.pooling.dispatcher import PoolerDispatcher, UnsupportedTaskError
from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.methods import AllPool, PoolingMethod, StepPool, pooling_method
from poolq.engine.pooling.pooler import Pooler

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
