"""Benchmarks, all in one home: `poolq bench` (poolq vs sentence-transformers, same texts, one process), `poolq bench
families` (long documents through ModernBERT- and Qwen3-shaped models) and the scripts behind `infra/bench/` (packed
vs padded, long-document memory), which only call in here."""
from poolq.devtools.bench.benchmark import run_benchmark

__all__ = ["run_benchmark"]
