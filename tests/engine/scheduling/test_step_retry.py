"""A step that runs out of memory is run again in halves; a window too big even alone fails its own
request only, and every request still ends exactly once."""
import dataclasses

import numpy as np
import pytest
import torch

from poolq.engine import EngineConfig, LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingRequest, RequestError
from poolq.engine.batch import BatchMetadata
from poolq.engine.device.oom import is_out_of_memory
from poolq.engine.scheduling.step_retry import OutOfMemory, run_in_halves, select_rows

TRUNCATE = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)


class OomAboveRunner:
    """The real runner, except that a batch of more than ``limit`` tokens runs out of memory."""

    def __init__(self, inner, limit: float) -> None:
        self.inner, self.limit = inner, limit
        self.ran: list[int] = []  # tokens of each batch that ran
        self.refused = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, batch):
        if batch.num_tokens > self.limit:
            self.refused += 1
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a step of {batch.num_tokens} tokens")
        self.ran.append(batch.num_tokens)
        return self.inner.forward(batch)


def _engine(minilm_engine, limit: float) -> PoolingEngine:
    loaded = dataclasses.replace(minilm_engine.loaded, runner=OomAboveRunner(minilm_engine.runner, limit))
    return PoolingEngine(loaded, EngineConfig(max_num_batched_tokens=512, lookahead_tokens=1024, dtype="float32"))


def _requests(texts, first=0):
    return [PoolingRequest(key=f"r{first + i}", text=text) for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
def texts(sample_documents):
    return [document["text"][: 40 + 37 * i] for i, document in enumerate(sample_documents[:16])]


def test_the_error_types_that_count_as_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                                         "allocate memory: you tried to allocate 4611686018427387904 bytes."))
    assert is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 1.2 GB)"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("[enforce fail at inline_container.cc:325] . file not found"))
    assert not is_out_of_memory(ValueError("out of memory"))  # not an allocator's error
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_halves_are_cut_by_tokens_and_rows_keep_their_order():
    batch = BatchMetadata.from_sequences([7, 8, 9, 10], [[1] * 100, [2], [3] * 3, [4] * 4], [None, None, [1, 1, 1], None])
    tried: list[tuple[int, ...]] = []

    def run(part, rows):
        tried.append(tuple(rows))
        if part.num_tokens > 8:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")
        return [f"row {row}: {part.input_ids[part.cu_seqlens[i]:part.cu_seqlens[i + 1]].tolist()}" for i, row in enumerate(rows)]

    outputs = run_in_halves(batch, run)
    # All four, then the long first sequence alone (half the tokens), then the rest together
    assert tried == [(0, 1, 2, 3), (0,), (1, 2, 3)]
    assert isinstance(outputs[0], OutOfMemory) and outputs[0].tokens == 100
    assert outputs[1:] == ["row 1: [2]", "row 2: [3, 3, 3]", "row 3: [4, 4, 4, 4]"]
    part = select_rows(batch, [1, 2])
    assert part.seq_indices == (8, 9) and part.cu_seqlens.tolist() == [0, 1, 4]
    assert part.position_ids.tolist() == [0, 0, 1, 2] and part.token_type_ids.tolist() == [0, 1, 1, 1]


def test_other_errors_are_not_retried():
    batch = BatchMetadata.from_sequences([0, 1], [[1, 2], [3]])

    def run(part, rows):
        raise RuntimeError("a real bug")

    with pytest.raises(RuntimeError, match="a real bug"):
        run_in_halves(batch, run)


def test_a_step_that_runs_out_of_memory_gives_the_same_results_in_smaller_steps(minilm_engine, texts):
    free, tight = _engine(minilm_engine, float("inf")), _engine(minilm_engine, 150)
    steps = []
    expected = list(free.run(_requests(texts), TRUNCATE))
    got = list(tight.run(_requests(texts), TRUNCATE, on_step=steps.append))
    runner = tight.runner
    # Every step over 150 tokens ran out of memory, and was run again as smaller ones
    assert runner.refused > 0 and max(runner.ran) <= 150 and max(free.runner.ran) > 150
    assert [r.key for r in got] == [r.key for r in expected]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.data, b.data, atol=1e-5)
    assert sum(step.tokens for step in steps) == sum(r.processed_tokens for r in got) == sum(runner.ran)


def test_an_input_too_big_even_alone_fails_alone(minilm_engine, texts):
    long_text = " ".join(texts)  # truncated to the model's window: 256 tokens, more than the limit
    requests = _requests(texts[:5]) + [PoolingRequest(key="big", text=long_text)] + _requests(texts[5:8], 5)
    expected = {r.key: r for r in _engine(minilm_engine, float("inf")).run(requests, TRUNCATE)}
    got = list(_engine(minilm_engine, 200).run(requests, TRUNCATE))
    assert [r.key for r in got] == [r.key for r in requests]
    errors = [r for r in got if isinstance(r, RequestError)]
    assert [(e.key, e.code) for e in errors] == [("big", "out_of_memory")]
    assert "a window of 256 tokens" in errors[0].message and "OutOfMemoryError" in errors[0].message
    for result in got:
        if result.key != "big":
            np.testing.assert_allclose(result.data, expected[result.key].data, atol=1e-5)


def test_a_long_document_whose_window_runs_out_of_memory_fails_as_one_request(minilm_engine, long_documents, texts):
    chunked = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED)
    requests = _requests(texts[:3]) + [PoolingRequest(key="long", text=long_documents[0]["text"])] + _requests(texts[3:6], 3)
    engine = _engine(minilm_engine, 200)  # the full windows (256 tokens) run out of memory, its last one may not
    steps = []
    got = list(engine.run(requests, chunked, on_step=steps.append))
    assert [r.key for r in got] == [r.key for r in requests]
    assert [(r.key, r.code) for r in got if isinstance(r, RequestError)] == [("long", "out_of_memory")]
    finished = [r.key for step in steps for r in step.finished]
    assert sorted(finished) == sorted(r.key for r in requests)  # each request ended exactly once
    # No step reports progress on the document after the one that failed it
    failed_at = next(i for i, step in enumerate(steps) if any(r.key == "long" for r in step.finished))
    assert not any(p.key == "long" for step in steps[failed_at:] for p in step.in_progress)
