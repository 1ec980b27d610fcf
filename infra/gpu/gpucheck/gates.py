"""The pass/fail rules of the GPU check: one per kind of output, numpy only (tested on CPU).

Vectors are judged by their cosine to the reference, one vector at a time; probabilities by an
absolute tolerance; relative error is reported for information and never gates a vector: bf16
keeps 8 bits of mantissa, so a vector at cosine 0.9999 to float32 can be 1.4e-2 away in relative
terms, and a gate on it would fail what the cosine gate passes.

Random-weight models make every text's vector nearly the same direction (raw cosines ~1 between
different texts), so their cosines are taken after subtracting the reference batch's mean vector
from both sides (``centre=True``): then a vector that belongs to another text fails.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GateResult:
    """Whether an output passed, and the numbers that decided it (one line, for the report)."""

    passed: bool
    detail: str
    worst: float | None = None  # the deciding number (lowest cosine, largest error), where there is one


def _finite(name: str, array: np.ndarray) -> GateResult | None:
    """A failed result if ``array`` holds a NaN or an infinity, else None."""
    bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
    return GateResult(False, f"{name}: {bad} of {np.size(array)} values are not finite") if bad else None


def _same_shape(got: np.ndarray, reference: np.ndarray) -> GateResult | None:
    if got.shape != reference.shape:
        return GateResult(False, f"shape {got.shape} differs from the reference's {reference.shape}")
    return None


def max_relative_error(got: np.ndarray, reference: np.ndarray) -> float:
    """The worst ``|got - ref| / |ref|`` over rows (vectors): information only, never a gate."""
    norms = np.maximum(np.linalg.norm(reference, axis=-1), np.finfo(np.float32).tiny)
    return float((np.linalg.norm(got - reference, axis=-1) / norms).max(initial=0.0))


def cosines(got: np.ndarray, reference: np.ndarray, centre: bool) -> np.ndarray:
    """Cosine of each row of ``got`` with the same row of ``reference`` (rows centred on the
    reference's mean row with ``centre``). A zero row against a non-zero one has cosine 0; two
    zero rows (e.g. two empty SPLADE vectors) agree, cosine 1."""
    got, reference = got.astype(np.float64), reference.astype(np.float64)
    if centre:
        mean = reference.mean(axis=0, keepdims=True)
        got, reference = got - mean, reference - mean
    dot = (got * reference).sum(axis=-1)
    norms = np.linalg.norm(got, axis=-1) * np.linalg.norm(reference, axis=-1)
    both_zero = (np.linalg.norm(got, axis=-1) == 0) & (np.linalg.norm(reference, axis=-1) == 0)
    return np.where(both_zero, 1.0, dot / np.where(norms > 0, norms, 1.0))


def vectors_gate(got: np.ndarray, reference: np.ndarray, min_cosine: float, *, centre: bool = True) -> GateResult:
    """Every row finite, and every row's cosine to its reference row at least ``min_cosine``.
    ``centre`` needs at least two reference rows (one row centred on itself is all zeros)."""
    got, reference = np.atleast_2d(got), np.atleast_2d(reference)
    failed = _same_shape(got, reference) or _finite("output", got) or _finite("reference", reference)
    if failed:
        return failed
    if centre and len(reference) < 2:
        raise ValueError("a centred cosine needs at least two reference vectors (one is its own mean)")
    worst = float(cosines(got, reference, centre).min(initial=1.0))
    kind = "centred cosine" if centre else "cosine"
    detail = (f"min {kind} {worst:.5f} over {len(got)} vectors (gate >= {min_cosine}); "
              f"max rel err {max_relative_error(got, reference):.1e} (info)")
    return GateResult(worst >= min_cosine, detail, worst)


def values_gate(got: np.ndarray, reference: np.ndarray, atol: float, what: str = "probability") -> GateResult:
    """Every value finite and within ``atol`` of the reference (probabilities, scores)."""
    got, reference = np.asarray(got), np.asarray(reference)
    failed = _same_shape(got, reference) or _finite("output", got) or _finite("reference", reference)
    if failed:
        return failed
    worst = float(np.abs(got.astype(np.float64) - reference).max(initial=0.0))
    return GateResult(worst <= atol, f"max abs {what} error {worst:.1e} over {got.size} values (gate <= {atol})", worst)


def all_of(results: list[GateResult]) -> GateResult:
    """One result for several outputs of one check: passed if each did; the details side by side."""
    return GateResult(all(result.passed for result in results), "; ".join(result.detail for result in results))


def sparse_rows(vectors, vocabulary: int) -> np.ndarray:
    """``[n, vocabulary]`` dense rows from SPLADE outputs (anything with ``token_ids`` and ``weights``)."""
    dense = np.zeros((len(vectors), vocabulary), dtype=np.float32)
    for row, vector in enumerate(vectors):
        dense[row, vector.token_ids] = vector.weights
    return dense
