"""Pooling heads: what each task does with a pooled vector or token states (embed, classify, score, sparse, M3)."""
