"""The engine works in steps: each step runs one batch and says what it did; results come out in
input order; urgent runs take the engine between two steps of another run."""
import threading
import time

import numpy as np
import pytest

from poolq.engine import (
    EngineConfig,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingEngine,
    PoolingOutput,
    PoolingRequest,
    PoolingTask,
    RequestError,
)
from poolq.engine.scheduling.step import StepOutput
from poolq.engine.turns import EngineTurns


@pytest.fixture(scope="module")
def small_steps(minilm_engine) -> PoolingEngine:
    """The session's MiniLM with steps of 512 tokens and 1,024 planned ahead."""
    return PoolingEngine(minilm_engine.loaded, EngineConfig(max_num_batched_tokens=512, lookahead_tokens=1024))


def _requests(texts):
    return [PoolingRequest(key=f"r{i}", text=text) for i, text in enumerate(texts)]


def test_each_step_runs_one_budget_and_reports_its_tokens_and_finished_requests(small_steps, sample_documents):
    texts = [document["text"][:400] for document in sample_documents[:30]]
    steps: list[StepOutput] = []
    results = list(small_steps.run(_requests(texts), LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE),
                                   on_step=steps.append))
    # Results in input order, equal to the list API's
    assert [r.key for r in results] == [f"r{i}" for i in range(len(texts))]
    np.testing.assert_allclose(np.stack([r.data for r in results]), small_steps.embed(texts,
                               policy=LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)), atol=1e-6)
    # Every step that ran the model stayed within the budget, and the steps account for every token once
    computed = [step.tokens for step in steps if step.tokens]
    assert len(computed) > 3 and max(computed) <= 512
    assert sum(computed) == sum(r.processed_tokens for r in results)
    assert sorted(r.key for step in steps for r in step.finished) == sorted(r.key for r in results)
    # And what was planned is reported once: its tokens, and its characters for a characters-per-token figure
    assert sum(step.planned_tokens for step in steps) == sum(computed)
    assert sum(step.planned_chars for step in steps) == sum(len(text) for text in texts)


def test_a_long_document_reports_partial_progress_step_by_step(small_steps, long_documents):
    text = long_documents[0]["text"]
    steps: list[StepOutput] = []
    (result,) = small_steps.run(_requests([text]), LongDocumentPolicy(mode=LongDocumentMode.CHUNKED), on_step=steps.append)
    partial = [progress.tokens_done for step in steps for progress in step.in_progress]
    # Its windows ran over several steps, each reporting more of them done, until the last finished it
    assert len(partial) >= 3 and partial == sorted(partial) and len(set(partial)) == len(partial)
    assert all(progress.tokens_total == result.processed_tokens for step in steps for progress in step.in_progress)
    assert [r.key for r in steps[-1].finished] == ["r0"]


def test_token_ids_are_embedded_as_the_text_they_came_from(minilm_engine):
    text = "the committee approved the budget on tuesday"
    ids = minilm_engine.tokenizer.count_and_tokenize([text])[0]
    by_text, by_ids = minilm_engine.run([PoolingRequest("t", text), PoolingRequest("i", "(tokens)", token_ids=tuple(ids))])
    np.testing.assert_allclose(by_text.data, by_ids.data, atol=1e-6)


def test_a_planning_failure_is_reported_in_order_without_stopping_the_others(small_steps):
    texts = ["short one", "word " * 1000, "another short one"]
    results = list(small_steps.run(_requests(texts)))  # mode error: the long one fails
    assert [type(r).__name__ for r in results] == ["PoolingOutput", "RequestError", "PoolingOutput"]
    assert isinstance(results[1], RequestError) and results[1].code == "document_too_long"


@pytest.mark.parametrize("mode", [LongDocumentMode.CHUNKED, LongDocumentMode.NAIVE_CHUNKS])
def test_a_long_pair_in_a_chunk_mode_is_a_per_record_error_not_a_crash(model_factory, bert_config, mode):
    # Given a cross-encoder of 128 positions, a short pair and one far longer than its window
    from transformers import BertForSequenceClassification

    path, _ = model_factory("pair-modes", BertForSequenceClassification, bert_config(num_labels=1))
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    requests = [PoolingRequest("short", "a query", PoolingTask.CLASSIFY, text_pair="a document"),
                PoolingRequest("long", "a query", PoolingTask.CLASSIFY, text_pair="word " * 200)]
    # When both run in a chunk mode (a pair is one sequence: no chunk mode can cut it)
    short, long = engine.run(requests, LongDocumentPolicy(mode=mode))
    # Then the long pair alone fails, naming the mode and what a pair takes; the short one is scored as ever
    assert isinstance(long, RequestError) and long.code == "unsupported_mode"
    assert repr(mode.value) in long.message and "set long_documents.mode to 'truncate'" in long.message
    assert isinstance(short, PoolingOutput)
    np.testing.assert_allclose(short.data, engine.classify(["a query"], text_pairs=["a document"])[0], atol=1e-6)


def test_a_run_stopped_between_steps_stops_planning_and_computing(small_steps, sample_documents):
    class Stop(Exception):
        pass

    seen = []

    def stop_after_two(step: StepOutput) -> None:
        seen.append(step)
        if len([s for s in seen if s.tokens]) == 2:
            raise Stop()

    texts = [document["text"] for document in sample_documents[:40]]
    with pytest.raises(Stop):
        list(small_steps.run(_requests(texts), LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE), on_step=stop_after_two))
    assert sum(1 for s in seen if s.tokens) == 2


def test_an_urgent_step_waits_only_for_the_step_in_progress():
    turns = EngineTurns()
    order = []
    batch_running = threading.Event()

    def batch_work():
        for step in range(3):
            with turns.step():
                order.append(f"batch{step}")
                if step == 0:
                    batch_running.set()
                    deadline = time.monotonic() + 5
                    while not turns.urgent_waiting and time.monotonic() < deadline:
                        time.sleep(0.001)

    def urgent_work():
        batch_running.wait(5)
        with turns.step(urgent=True):
            order.append("urgent")

    threads = [threading.Thread(target=batch_work), threading.Thread(target=urgent_work)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    # The urgent step ran right after the batch step in progress, ahead of the next batch step
    assert order == ["batch0", "urgent", "batch1", "batch2"]


@pytest.mark.parametrize("text", ["", "   ", "\u200b"])
def test_a_text_without_tokens_is_a_per_record_error_for_every_task(minilm_engine, text):
    """An empty (or whitespace, or zero-width) text is ``empty_after_tokenization`` for each task, and the
    text beside it in the run still gets its output."""
    for task in (PoolingTask.EMBED, PoolingTask.TOKEN_EMBED):
        empty, fine = minilm_engine.run([PoolingRequest("empty", text, task), PoolingRequest("fine", "a fox", task)])
        assert isinstance(empty, RequestError) and empty.code == "empty_after_tokenization"
        assert isinstance(fine, PoolingOutput)
