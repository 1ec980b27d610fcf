"""Every task x every long-document mode it takes x float32, bfloat16, float16, on tiny random models of
each family (BERT, XLM-R, MPNet, ModernBERT, a Llama decoder with last-token pooling, BGE-M3's layout): nothing
crashes, every output is finite float32, and every row agrees with the float32 engine's within its
dtype's gate. bf16 and fp16 run emulated where the CPU lacks them, so this runs everywhere.

The documents are longer than the tiny window, so truncate, chunked, naive and late chunking really cut.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from support.random_models import (
    family_class,
    save_random_m3_layout,
    save_random_model,
    tiny_family_config,
    write_splade_modules,
    write_st_modules,
)

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingRequest, PoolingTask, SparseVector
from poolq.engine.long_documents.policy_check import MODES_BY_TASK

WINDOW = 16  # tokens per model sequence: every long document below takes several
LONG_DOCS = [
    "The red fox hunts mice in the tall grass at dawn, then rests under the old oak tree near the river. "
    "In winter its coat grows thick and it follows the scent of rabbits across the frozen fields for miles.",
    "Interest rates rose again this quarter as the central bank fought inflation; mortgage costs climbed, "
    "house prices slipped in most cities, and several lenders tightened the rules for first-time buyers.",
    "To compile the kernel, install the toolchain, copy the default configuration, enable the drivers "
    "you need, run make with one job per core and copy the image to the boot partition before rebooting.",
    "She played the cello every evening: Bach suites first, then scales, then whatever the orchestra "
    "had rehearsed that week, until the neighbours knocked on the wall and asked for something quieter.",
]
SHORT_TEXTS = ["a fox in the snow", "rates rose again", "make the kernel", "cello suites at night"]  # within the window
QUERIES = ["where do foxes rest?", "what happened to mortgages?", "how to build a kernel", "who plays bach?"]

# Gates of a bf16 / fp16 row against the float32 one. Vectors: the cosine of the two rows after both
# are centred on the float32 rows' mean (random weights make raw vectors nearly parallel, so a raw
# cosine would pass anything; centred, what is left is what tells the inputs apart). Probabilities and
# scores: the largest absolute difference. bf16 keeps 8 mantissa bits (~4e-3 relative per rounding),
# fp16 11 (~5e-4). Worst seen on these models: bf16 cosine 0.988 (BGE-M3 sparse of short chunks, where
# a weight near 0 flips in or out of relu) and 0.9987 elsewhere, probability 0.018; fp16 cosine
# 0.99997, probability 0.002. The gates sit ~1.5-30x above those and far below what another input's
# output scores (``_assert_gate_discriminates``: centred cosines under 0.35, probabilities 0.03 apart).
# float32 is the reference itself: its cases check that every path runs and gives finite float32.
COSINE_GATES = {"float32": 0.99999, "bfloat16": 0.97, "float16": 0.999}
ABS_GATES = {"float32": 1e-5, "bfloat16": 0.025, "float16": 0.005}
DTYPES = tuple(COSINE_GATES)
FAMILIES = ("bert", "xlm-roberta", "mpnet", "modernbert", "llama")
NO_MLM_HEAD = ("llama", "modernbert")  # a decoder has none; ModernBERT's (head + decoder) is not one poolq reads
DECODERS = ("llama",)
# Random weights drawn 10x wider than transformers' 0.02: at 0.02 attention is uniform and tiny, so a
# CLS or last-token state hardly depends on the text and a classifier's logits are ~0 (every input's
# probabilities alike); the dtype noise would then be all there is to compare.
INIT = 0.2


def _policy(mode: LongDocumentMode) -> LongDocumentPolicy:
    # Late chunking mean-pools token states; the decoder (LAST) and BGE-M3 (CLS) are let do it anyway.
    return LongDocumentPolicy(mode=mode, window_tokens=WINDOW, allow_any_pooling=True)


def _texts(mode: LongDocumentMode) -> list[str]:
    return SHORT_TEXTS if mode is LongDocumentMode.ERROR else LONG_DOCS


# -- models: each built once per module, each engine loaded once per dtype ------------------------------
def _save_encoder(path, family):
    config = tiny_family_config(family, initializer_range=INIT)
    save_random_model(path, family_class(family, "Model"), config)
    write_st_modules(path, config.hidden_size, pooling="lasttoken" if family in DECODERS else "mean")


def _save_classifier(num_labels):
    def save(path, family):
        config = tiny_family_config(family, num_labels=num_labels, initializer_range=INIT)
        save_random_model(path, family_class(family, "ForSequenceClassification"), config)
    return save


def _save_token_classifier(path, family):
    config = tiny_family_config(family, num_labels=5, initializer_range=INIT)
    save_random_model(path, family_class(family, "ForTokenClassification"), config)


def _save_splade(path, family):
    config = tiny_family_config(family, initializer_range=INIT)
    save_random_model(path, family_class(family, "ForMaskedLM"), config)
    write_splade_modules(path, config.vocab_size)


def _save_m3(path, family):
    save_random_m3_layout(path, tiny_family_config(family, initializer_range=INIT), seed=3)


SAVERS = {"encoder": _save_encoder, "classifier": _save_classifier(3), "cross_encoder": _save_classifier(1),
          "token_classifier": _save_token_classifier, "splade": _save_splade, "m3": _save_m3}


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    paths: dict[tuple[str, str], object] = {}
    loaded: dict[tuple[str, str, str], PoolingEngine] = {}

    def engine(family: str, kind: str, dtype: str) -> PoolingEngine:
        if (family, kind) not in paths:
            path = tmp_path_factory.mktemp(f"{family}-{kind}")
            SAVERS[kind](path, family)
            paths[family, kind] = path
        if (family, kind, dtype) not in loaded:
            loaded[family, kind, dtype] = PoolingEngine.from_pretrained(str(paths[family, kind]), dtype=dtype)
        return loaded[family, kind, dtype]

    return engine


# -- what each case runs: blocks of output rows ``[rows, dim]``, each compared with float32's ------------
def _rows(outputs) -> np.ndarray:
    """Every output row of a run stacked ``[rows, dim]``: a vector, a chunk's, a token's; sparse vectors dense."""
    rows: list[np.ndarray] = []
    for output in outputs:
        for row in (output if isinstance(output, tuple) else [output]):
            rows.extend([_dense(row)] if isinstance(row, SparseVector) else np.atleast_2d(row))
    return np.stack(rows)


def _dense(sparse: SparseVector) -> np.ndarray:
    row = np.zeros(30522, dtype=sparse.weights.dtype)
    row[sparse.token_ids] = sparse.weights
    return row


def _run_task(task: PoolingTask):
    def run(engine: PoolingEngine, mode: LongDocumentMode) -> list[np.ndarray]:
        return [_rows(engine.encode(_texts(mode), task, policy=_policy(mode)))]
    return run


def _run_score(score_mode: str):
    def run(engine: PoolingEngine, mode: LongDocumentMode) -> list[np.ndarray]:
        return [engine.score(QUERIES, SHORT_TEXTS, mode=score_mode)[:, None]]  # the default policy: short texts
    return run


M3_TASKS = (PoolingTask.EMBED, PoolingTask.SPARSE_EMBED, PoolingTask.TOKEN_EMBED)


def _run_m3_at_once(engine: PoolingEngine, mode: LongDocumentMode) -> list[np.ndarray]:
    """dense, sparse and ColBERT outputs of one forward pass: a block each."""
    requests = [PoolingRequest(i, text, M3_TASKS[0], also=M3_TASKS[1:]) for i, text in enumerate(_texts(mode))]
    results = list(engine.run(requests, _policy(mode)))
    return [_rows([result.data.outputs[task] for result in results]) for task in M3_TASKS]


@dataclass(frozen=True)
class Task:
    kind: str  # of model (SAVERS)
    run: Callable[[PoolingEngine, LongDocumentMode], list[np.ndarray]]
    compare: str  # "cosine": rows are vectors; "abs": rows are probabilities or scores
    modes: tuple[LongDocumentMode, ...]


def _task(kind: str, task: PoolingTask, compare: str) -> Task:
    return Task(kind, _run_task(task), compare, MODES_BY_TASK[task])


ONE_WINDOW = (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE)  # what several tasks at once take
TASKS = {
    "embed": _task("encoder", PoolingTask.EMBED, "cosine"),
    "token_embed": _task("encoder", PoolingTask.TOKEN_EMBED, "cosine"),
    "sparse_embed": _task("splade", PoolingTask.SPARSE_EMBED, "cosine"),
    "classify": _task("classifier", PoolingTask.CLASSIFY, "abs"),
    "token_classify": _task("token_classifier", PoolingTask.TOKEN_CLASSIFY, "abs"),
    "score_cosine": Task("encoder", _run_score("cosine"), "abs", (LongDocumentMode.ERROR,)),
    "score_cross_encoder": Task("cross_encoder", _run_score("cross_encoder"), "abs", (LongDocumentMode.ERROR,)),
    "m3_embed": _task("m3", PoolingTask.EMBED, "cosine"),
    "m3_sparse_embed": _task("m3", PoolingTask.SPARSE_EMBED, "cosine"),
    "m3_multi_vector": _task("m3", PoolingTask.TOKEN_EMBED, "cosine"),
    "m3_all_at_once": Task("m3", _run_m3_at_once, "cosine", ONE_WINDOW),
}


def _families(task: Task) -> tuple[str, ...]:
    if task.kind == "m3":
        return ("xlm-roberta",)  # BGE-M3 is an XLM-R encoder
    return tuple(f for f in FAMILIES if not (task.kind == "splade" and f in NO_MLM_HEAD))


CASES = [pytest.param(family, name, mode, id=f"{family}-{name}-{mode.value}")
         for name, task in TASKS.items() for family in _families(task) for mode in task.modes]


@pytest.fixture(scope="module")
def references(engines):
    cache: dict[tuple[str, str, LongDocumentMode], list[np.ndarray]] = {}

    def reference(family: str, name: str, mode: LongDocumentMode) -> list[np.ndarray]:
        if (family, name, mode) not in cache:
            cache[family, name, mode] = TASKS[name].run(engines(family, TASKS[name].kind, "float32"), mode)
        return cache[family, name, mode]

    return reference


def centred_cosines(got: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per-row cosine of ``got`` and ``reference`` after subtracting the reference rows' mean from both."""
    mean = reference.mean(axis=0, keepdims=True)
    a, b = got - mean, reference - mean
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _assert_gate_discriminates(reference: np.ndarray, compare: str, dtype: str) -> None:
    """The gate must reject most rows of *another* input: else agreeing with float32 would prove nothing."""
    other = np.roll(reference, 1, axis=0)
    if compare == "cosine":
        assert np.median(centred_cosines(other, reference)) < COSINE_GATES[dtype]
    else:  # a row fails when any of its values is off by more than the gate
        assert np.median(np.abs(other - reference).max(axis=1)) > ABS_GATES[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family, name, mode", CASES)
def test_every_task_and_mode_agrees_with_float32(engines, references, family, name, mode, dtype):
    task = TASKS[name]
    blocks = task.run(engines(family, task.kind, dtype), mode)
    for got, reference in zip(blocks, references(family, name, mode), strict=True):
        _assert_gate_discriminates(reference, task.compare, dtype)
        assert got.dtype == np.float32 and got.shape == reference.shape
        assert np.isfinite(got).all()
        if task.compare == "cosine":
            assert centred_cosines(got, reference).min() >= COSINE_GATES[dtype]
        else:
            np.testing.assert_allclose(got, reference, rtol=0, atol=ABS_GATES[dtype])
