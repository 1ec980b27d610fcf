"""Every check of the GPU first-contact run, in order, and what they share while they run.

Fast checks that would explain later failures come first (the kernels, the real model), then the
matrix (within its time budget), the worker, and the benchmark last (timings only).
Building the plan imports nothing heavy: ``--dry-run`` lists it on any machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucheck.checks import Check, NotRun
from gpucheck.engine_checks import MINILM_MIN_COSINE, benchmark_check, minilm_check, segment_pool_check, span_mean_check
from gpucheck.gates import GateResult
from gpucheck.matrix import EXPECTED_CELL_S, MatrixCell, MatrixRunner, Texts, matrix_cells
from gpucheck.worker_smoke import JOB_TIMEOUT_S, MIN_COSINE, run_worker_smoke

MATRIX_BUDGET = "matrix"
DEFAULT_MATRIX_BUDGET_S = 300.0


@dataclass
class CheckContext:
    """What the checks of one run share: the device under test, a scratch folder, the models' files,
    the texts; the matrix runner (its models and references) and other results computed once."""

    device: str
    workdir: Path
    repo: Path
    python_path: str  # what makes ``poolq`` importable in a subprocess (check.py's linked view)
    minilm: Path | None  # MiniLM's directory, carried or installed
    tokenizer: Path | None  # a BERT tokenizer's files (MiniLM's) for the random models
    corpus: list[dict]
    cache: dict[str, Any] = field(default_factory=dict)
    _matrix: MatrixRunner | None = None

    @property
    def texts(self) -> Texts:
        return Texts.from_corpus(self.corpus)

    def matrix(self) -> MatrixRunner:
        if self.tokenizer is None:
            raise NotRun("no BERT tokenizer files for the random models: run `python3 infra/gpu/prepare.py` "
                         "beforehand and carry .poolq/gpu-carry")
        if self._matrix is None:
            self._matrix = MatrixRunner(self.workdir / "matrix", self.tokenizer, self.texts, self.device)
        return self._matrix


def _cell_check(cell: MatrixCell) -> Check[CheckContext]:
    return Check(cell.name, cell.what, cell.gate, EXPECTED_CELL_S, lambda context: context.matrix().run(cell), MATRIX_BUDGET)


def _worker_smoke(context: CheckContext) -> GateResult:
    if context.tokenizer is None:
        raise NotRun("no BERT tokenizer files for the job's random model: see the matrix checks")
    return run_worker_smoke(context.workdir / "worker-smoke", context.tokenizer, context.texts, context.device,
                            context.repo / "pyproject.toml", context.python_path)


def plan() -> list[Check[CheckContext]]:
    """The whole run, in order."""
    minilm = "all-MiniLM-L6-v2 embed (truncate) of the 37 shipped documents"
    return [
        Check("kernel/span_mean", "Triton span mean (the engine's MEAN pooling and late chunks on CUDA), bf16 in",
              "max abs error <= 1e-3 vs its torch reference", 5.0, span_mean_check),
        Check("kernel/segment_pool", "Triton segment mean/first/last, normalize on and off, fp32/fp16/bf16, an empty "
              "segment (run only by the tests elsewhere)", "max abs error <= 1e-3 vs the torch references", 30.0,
              segment_pool_check),
        Check("minilm/bf16", f"{minilm}, bfloat16 on the device", f"cosine per vector >= {MINILM_MIN_COSINE} vs CPU fp32",
              15.0, minilm_check("bfloat16")),
        Check("minilm/fp16", f"{minilm}, float16 on the device", f"cosine per vector >= {MINILM_MIN_COSINE} vs CPU fp32",
              5.0, minilm_check("float16")),
        *(_cell_check(cell) for cell in matrix_cells()),
        Check("worker/smoke", "Redis + API + `poolq worker --gpus 0` (dtype auto), one job of 6 documents (chunked) over "
              "HTTP with the client, local-folder store", f"job succeeded on the device, one row per document, "
              f"centred cosine >= {MIN_COSINE} vs CPU fp32", 60.0 + JOB_TIMEOUT_S / 4, _worker_smoke),
        Check("benchmark", "poolq bf16 vs sentence-transformers fp16: MiniLM and a random BERT-base, mixed and full "
              "windows", "none (timings: tok/s, TFLOP/s, MFU)", 120.0, benchmark_check),
    ]
