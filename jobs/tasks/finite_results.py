"""No vector holding NaN or infinity leaves a worker: a result with one becomes that input's error.

One check for both ways out: a job's rows (the shard turns it into a per-record error, so the record
is in the error file, not in a part) and the interactive lane's answer (a per-input error; JSON has no
NaN). A model can overflow in a narrow compute dtype (fp16) on some inputs only, so the check looks
at every value the task writes: dense vectors, token vectors, sparse weights, classification scores.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from poolq.engine import ChunkRows, EngineResult, MultiOutput, PooledData, PoolingOutput, RequestError, SparseVector

NON_FINITE_CODE = "non_finite_vector"


def non_finite_error(result: PoolingOutput, dtype: str) -> RequestError | None:
    """The error for ``result`` if any value it holds is NaN or infinite; None when all are finite."""
    data = result.data
    if isinstance(data, np.ndarray):  # one dense vector, the common case: no walk over the data's kinds
        finite = bool(np.isfinite(data).all())
    else:
        finite = all(np.isfinite(values).all() for values in _values(data))
    if finite:
        return None
    return RequestError(result.key, NON_FINITE_CODE,
                        f"the model's vector holds NaN or infinity (compute dtype {dtype})")


def finite_results(results: Iterable[EngineResult], dtype: str) -> Iterator[EngineResult]:
    """``results``, each one holding a non-finite value replaced by its :func:`non_finite_error`."""
    for result in results:
        error = non_finite_error(result, dtype) if isinstance(result, PoolingOutput) else None
        yield error or result


def _values(data: PooledData | ChunkRows) -> Iterator[np.ndarray]:
    """The numbers a result's data holds (a sparse vector's weights, not its token ids)."""
    if isinstance(data, np.ndarray):
        yield data
    elif isinstance(data, SparseVector):
        yield data.weights
    elif isinstance(data, MultiOutput):
        for output in data.outputs.values():
            yield from _values(output)
    else:  # chunk rows of a sparse task: one sparse vector per chunk
        for chunk in data:
            yield from _values(chunk)
