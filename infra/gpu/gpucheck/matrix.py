"""The CUDA matrix: tasks x long-document modes x half-precision dtypes on tiny random models of four
families, each cell against the same model in float32 on the CPU.

A cell is one (task, family, mode, dtype). Its outputs (vectors, probabilities, scores) go through
``gates.py``: vectors by centred cosine, probabilities and scores by an absolute tolerance, and
everything must be finite. The CPU float32 outputs are computed once per (task, family, mode) and
shared by both dtypes. ``device`` is the side under test: ``cuda`` on the GPU machine, ``cpu`` in
the test suite, which runs a cell this way so that the code path is exercised without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from gpucheck.gates import GateResult, all_of, sparse_rows, values_gate, vectors_gate
from gpucheck.random_models import VOCAB, Family, Head, ModelKey, build_model

# Gates of a half-precision output against float32 on these tiny models. bf16 keeps 8 mantissa
# bits (~4e-3 relative per rounding), fp16 11 (~5e-4). The worst the CPU's emulation of each dtype
# showed on this whole matrix (2026-12): centred cosine 0.99998 (fp16) and 0.99855 (bf16, a
# decoder's token vectors); probability error 2.6e-3 (fp16) and 2.8e-2 (bf16, the decoder's token
# probabilities, chunked: the worst of 8,000 values). Each gate sits several times above that and
# far below what another text's output scores (tests/infra/test_gpu_check.py: a wrong row fails).
MIN_CENTRED_COSINE = {"float16": 0.999, "bfloat16": 0.99}
MAX_ABS_ERROR = {"float16": 0.01, "bfloat16": 0.05}
DTYPES = ("float16", "bfloat16")
SHORT_DTYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
WINDOW_TOKENS = 32  # tokens per model sequence in the long-document modes: each long text takes several
EXPECTED_CELL_S = 1.0  # on the GPU machine, a model's first cell (build, load, CPU reference) included

Outputs = dict[str, tuple[str, np.ndarray]]  # name -> ("vectors" | "values", rows)


@dataclass(frozen=True)
class Texts:
    """Short texts (within one window) and long ones (several windows), from the shipped corpus."""

    short: tuple[str, ...]
    long: tuple[str, ...]
    pairs: tuple[str, ...]  # a second text for each short one (scores)

    @classmethod
    def from_corpus(cls, documents: list[dict]) -> "Texts":
        """Four short texts of 6-12 words and their pairs of 7-10 words from the first documents' openings
        (different lengths: a batch with padding and ragged packing), two long texts of 150 words."""
        words = [doc["text"].split() for doc in documents[:8]]
        short = tuple(" ".join(w[3 + i: 9 + 2 * i]) for i, w in enumerate(words[:4]))
        pairs = tuple(" ".join(w[20 + i: 30]) for i, w in enumerate(words[:4]))
        return cls(short, tuple(" ".join(w[:150]) for w in words[4:6]), pairs)

    @property
    def all(self) -> list[str]:
        return [*self.short, *self.long]


def _policy(mode: str):
    from poolq.engine import LongDocumentMode, LongDocumentPolicy

    return LongDocumentPolicy(mode=LongDocumentMode(mode), window_tokens=WINDOW_TOKENS)


def _encoded(task_name: str, kind: str, to_rows: Callable[[list], np.ndarray] = np.vstack):
    """A runner: ``engine.encode`` of every text for the task, stacked into rows of one kind."""
    def run(engine, mode: str, texts: Texts) -> Outputs:
        from poolq.engine import PoolingTask

        return {task_name: (kind, to_rows(engine.encode(texts.all, PoolingTask(task_name), policy=_policy(mode))))}
    return run


def _sparse(outputs: list) -> np.ndarray:
    return sparse_rows(outputs, VOCAB)


def _scores(score_mode: str):
    """``engine.score`` of each short text with its pair (it takes no long-document policy)."""
    def run(engine, mode: str, texts: Texts) -> Outputs:
        return {f"{score_mode} score": ("values", engine.score(list(texts.short), list(texts.pairs), mode=score_mode))}
    return run


def _multi_vector(engine, mode: str, texts: Texts) -> Outputs:
    """BGE-M3: dense, sparse and ColBERT outputs of one forward pass per text."""
    from poolq.engine import PoolingRequest, PoolingTask

    tasks = (PoolingTask.EMBED, PoolingTask.SPARSE_EMBED, PoolingTask.TOKEN_EMBED)
    requests = [PoolingRequest(i, text, tasks[0], also=tasks[1:]) for i, text in enumerate(texts.all)]
    results = [_data(result) for result in engine.run(requests, _policy(mode))]
    return {"dense": ("vectors", np.vstack([r.outputs[tasks[0]] for r in results])),
            "sparse": ("vectors", _sparse([r.outputs[tasks[1]] for r in results])),
            "colbert": ("vectors", np.vstack([r.outputs[tasks[2]] for r in results]))}


def _data(result):
    """A result's data; a RequestError raises, naming its code and message."""
    data = getattr(result, "data", None)
    if data is None:
        raise RuntimeError(f"input {result.key}: {result.code}: {result.message}")
    return data


@dataclass(frozen=True)
class MatrixTask:
    """One row of the matrix: the model each family runs it on, the modes it takes, how it runs."""

    name: str
    models: dict[Family, Head]
    modes: tuple[str, ...]
    run: Callable[[object, str, Texts], Outputs] = field(repr=False)
    gate: str  # what decides, for the plan


_ALL = tuple(Family)
_ENCODERS = (Family.BERT, Family.XLMR, Family.MPNET)  # a decoder has no masked-LM head
# The embedding model of each family: MEAN pooling where it is usual (and runs the Triton span
# mean on CUDA), BGE-M3's CLS for XLM-R, LAST for the decoder.
_EMBEDDERS = {Family.BERT: Head.MEAN_ENCODER, Family.XLMR: Head.ENCODER, Family.MPNET: Head.MEAN_ENCODER,
              Family.DECODER: Head.ENCODER}
_VECTORS, _VALUES = "centred cosine per vector", "max abs error"
TASKS = (
    MatrixTask("embed", _EMBEDDERS, ("truncate", "chunked"), _encoded("embed", "vectors"), _VECTORS),
    # late chunking mean-pools chunk token states: where the model itself pools MEAN
    MatrixTask("embed", {f: _EMBEDDERS[f] for f in (Family.BERT, Family.MPNET)}, ("late_chunks",),
               _encoded("embed", "vectors"), _VECTORS),
    MatrixTask("sparse_embed", {f: Head.MASKED_LM for f in _ENCODERS}, ("truncate", "chunked"),
               _encoded("sparse_embed", "vectors", _sparse), _VECTORS),
    MatrixTask("classify", {f: Head.CLASSIFIER for f in _ALL}, ("truncate", "chunked"), _encoded("classify", "values"), _VALUES),
    MatrixTask("score_cross_encoder", {f: Head.CROSS_ENCODER for f in _ALL}, ("pairs",), _scores("cross_encoder"), _VALUES),
    MatrixTask("score_cosine", {f: _EMBEDDERS[f] for f in (Family.BERT, Family.DECODER)}, ("pairs",), _scores("cosine"),
               _VALUES),
    MatrixTask("token_embed", _EMBEDDERS, ("truncate", "chunked"), _encoded("token_embed", "vectors"), _VECTORS),
    MatrixTask("token_classify", {f: Head.TOKEN_CLASSIFIER for f in _ALL}, ("truncate", "chunked"),
               _encoded("token_classify", "values"), _VALUES),
    MatrixTask("multi_vector", {Family.XLMR: Head.M3}, ("truncate",), _multi_vector, _VECTORS),
)


@dataclass(frozen=True)
class MatrixCell:
    task: MatrixTask
    family: Family
    mode: str
    dtype: str

    @property
    def name(self) -> str:
        return f"matrix/{self.task.name}/{self.family.value}/{self.mode}/{SHORT_DTYPE[self.dtype]}"

    @property
    def model(self) -> ModelKey:
        return ModelKey(self.family, self.task.models[self.family])

    @property
    def gate(self) -> str:
        limit = MIN_CENTRED_COSINE[self.dtype] if self.task.gate == _VECTORS else MAX_ABS_ERROR[self.dtype]
        relation = ">=" if self.task.gate == _VECTORS else "<="
        return f"{self.task.gate} {relation} {limit} vs CPU fp32, all finite"

    @property
    def what(self) -> str:
        return f"{self.task.name} ({self.mode}) on a random {self.model.name}, {self.dtype} vs CPU float32"


def matrix_cells() -> list[MatrixCell]:
    """Every cell, grouped by dtype (fp16 first): a budget cut leaves whole dtypes rather than holes."""
    return [MatrixCell(task, family, mode, dtype) for dtype in DTYPES for task in TASKS
            for family in task.models for mode in task.modes]


def compare(got: Outputs, reference: Outputs, dtype: str) -> GateResult:
    """Each named output against the reference's, by its kind's gate for ``dtype``."""
    results = []
    for name, (kind, rows) in reference.items():
        gate = (vectors_gate(got[name][1], rows, MIN_CENTRED_COSINE[dtype]) if kind == "vectors"
                else values_gate(got[name][1], rows, MAX_ABS_ERROR[dtype]))
        results.append(GateResult(gate.passed, f"{name}: {gate.detail}" if len(reference) > 1 else gate.detail))
    return all_of(results)


class MatrixRunner:
    """Runs cells on ``device``; builds each model once (under ``workdir``), loads each engine once
    per (device, dtype), computes each CPU float32 reference once."""

    def __init__(self, workdir: Path, tokenizer_dir: Path, texts: Texts, device: str = "cuda") -> None:
        self.workdir, self.tokenizer_dir, self.texts, self.device = workdir, tokenizer_dir, texts, device
        self._paths: dict[ModelKey, Path] = {}
        self._engines: dict[tuple[ModelKey, str, str], object] = {}
        self._references: dict[tuple[str, Family, str], Outputs] = {}

    def engine(self, key: ModelKey, device: str, dtype: str):
        from poolq.engine import PoolingEngine

        if key not in self._paths:
            self._paths[key] = build_model(self.workdir / key.name, key, self.tokenizer_dir)
        if (key, device, dtype) not in self._engines:
            self._engines[key, device, dtype] = PoolingEngine.from_pretrained(str(self._paths[key]), device=device, dtype=dtype)
        return self._engines[key, device, dtype]

    def reference(self, cell: MatrixCell) -> Outputs:
        key = (cell.task.name, cell.family, cell.mode)
        if key not in self._references:
            self._references[key] = cell.task.run(self.engine(cell.model, "cpu", "float32"), cell.mode, self.texts)
        return self._references[key]

    def run(self, cell: MatrixCell) -> GateResult:
        """The cell's outputs on this runner's device in its dtype against the CPU float32 reference."""
        reference = self.reference(cell)
        got = cell.task.run(self.engine(cell.model, self.device, cell.dtype), cell.mode, self.texts)
        return compare(got, reference, cell.dtype)
