"""Interleaved timing of several variants on one corpus: every round runs each of them once, in
an order rotated round by round (no variant always runs first, after the others warmed the
caches); medians are reported, with each variant's vectors from its last round."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from poolq.devtools.bench.variants import Variant


@dataclass(frozen=True)
class Timed:
    variant: Variant
    median_s: float
    vectors: np.ndarray


def time_variants(variants: list[Variant], texts: list[str], rounds: int) -> list[Timed]:
    for variant in variants:
        variant.encode(texts[:4])  # warm-up: lazy initialisation, first-call kernels
    seconds: dict[str, list[float]] = {variant.name: [] for variant in variants}
    vectors: dict[str, np.ndarray] = {}
    for round_index in range(rounds):
        shift = round_index % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            start = time.perf_counter()
            vectors[variant.name] = np.asarray(variant.encode(texts), dtype=np.float32)
            seconds[variant.name].append(time.perf_counter() - start)
    return [Timed(variant, statistics.median(seconds[variant.name]), vectors[variant.name]) for variant in variants]


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())
