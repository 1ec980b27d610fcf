"""`poolq bench`: poolq's engine against sentence-transformers on the same texts, in one process."""
from poolq.api.bench.benchmark import run_benchmark

__all__ = ["run_benchmark"]
