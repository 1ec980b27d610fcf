"""Native model forwards that run poolq's packed layout directly (no padding tokens)."""
from poolq.engine.models.packed_bert import PackedBertEncoder, supports

__all__ = ["PackedBertEncoder", "supports"]
