"""A worker's answer to a lane request, on a real MiniLM engine: the vectors a job writes for the
same texts, model and options; per-input errors; a deadline that passes; a failure of its own;
and a request answered between two steps of a run already going on the same engine."""
import json
import threading
import time

import numpy as np
import pytest

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingRequest
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.lane.embedding_lane import TakenRequest
from poolq.jobs.lane.lane_embedder import embed_taken
from poolq.jobs.lane.lane_messages import EmbeddingRequest
from poolq.jobs.spec.job_spec import JobSpec
from poolq.storage import read_embeddings
from poolq.worker.local_runner import run_job_locally

MODEL = "all-MiniLM-L6-v2"


def _taken(request: EmbeddingRequest, timeout_s: float = 120) -> TakenRequest:
    return TakenRequest("test-request", request, time.monotonic() + timeout_s)


def _job_vectors(ctx, texts: list[str], **options) -> np.ndarray:
    """The vectors an embed job writes for ``texts`` (in their order), read back from its Parquet parts."""
    documents = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(texts)]
    spec = JobSpec.model_validate({"model": MODEL, "input": {"documents": documents}, **options})
    status = run_job_locally(ctx, spec)
    layout = JobHandle.bind(ctx, status.id).layout
    rows = {}
    for part in json.loads(ctx.store.get(layout.manifest))["parts"]:
        table = read_embeddings(ctx.store.get(part["key"]))
        rows.update(zip(table.column("id").to_pylist(), table.column("embedding").to_pylist()))
    return np.array([rows[d["id"]] for d in documents], dtype=np.float32)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("options", [
    {},
    {"dimensions": 128, "long_documents": {"mode": "truncate"}},
    {"long_documents": {"mode": "chunked", "window_tokens": 64}},
], ids=["defaults", "dimensions-truncate", "chunked"])
def test_the_vectors_equal_a_jobs_for_the_same_texts_and_options(local_ctx, sample_documents, options):
    # Given texts short and long (chunked: several windows each), and a job's options
    texts = [d["text"][:1500] for d in sample_documents[:6]] + ["a short query?"]
    if "long_documents" not in options:  # mode error: keep every text inside the window
        texts = [text[:300] for text in texts]
    job = _job_vectors(local_ctx, texts, **({"output": {"dimensions": options["dimensions"]}} if "dimensions" in options else {}),
                       **{k: v for k, v in options.items() if k == "long_documents"})
    # When the lane is asked for them with the same options
    request = EmbeddingRequest(model=MODEL, inputs=texts, **options)
    reply = embed_taken(lambda: local_ctx.engines, _taken(request))
    # Then they are the job's vectors, and the usage counts the tokens the model ran
    assert reply.errors == [] and reply.failure is None
    assert reply.vectors().shape == job.shape
    assert _cosines(reply.vectors(), job).min() >= 0.99999
    assert reply.prompt_tokens > 0 and reply.engine == local_ctx.engines.identity(MODEL)


def test_token_arrays_embed_as_their_text(local_ctx, minilm_engine):
    # Given a text and its token ids (the model's own, without special tokens)
    text = "Where do the embeddings of a query come from?"
    [token_ids] = minilm_engine.tokenizer.count_and_tokenize([text])
    # When both are sent
    reply = embed_taken(lambda: local_ctx.engines, _taken(EmbeddingRequest(model=MODEL, inputs=[text])))
    by_ids = embed_taken(lambda: local_ctx.engines, _taken(EmbeddingRequest(model=MODEL, inputs=[list(token_ids)])))
    # Then the vectors are the same
    assert _cosines(reply.vectors(), by_ids.vectors()).min() >= 0.99999
    assert reply.prompt_tokens == by_ids.prompt_tokens


def test_per_input_failures_name_the_input_and_the_reason(local_ctx, sample_documents):
    long_text = sample_documents[0]["text"] * 3  # past the window: mode error refuses it
    request = EmbeddingRequest(model=MODEL, inputs=["fine", long_text, "fine too"])
    reply = embed_taken(lambda: local_ctx.engines, _taken(request))
    [error] = reply.errors
    assert (error.index, error.code) == (1, "document_too_long") and "window is 256" in error.message
    assert error.message.endswith("(set long_documents.mode to 'truncate' or 'chunked')"), error.message  # what the route takes
    assert reply.count == 0


def test_token_ids_outside_the_vocabulary_are_refused_before_the_model_runs(local_ctx):
    request = EmbeddingRequest(model=MODEL, inputs=[[101, 2000], [5, 30522, 7]])
    [error] = embed_taken(lambda: local_ctx.engines, _taken(request)).errors
    assert (error.index, error.code) == (1, "invalid_token_id") and "30522" in error.message


def test_a_request_past_its_deadline_gets_no_reply(local_ctx):
    request = EmbeddingRequest(model=MODEL, inputs=["too late"])
    assert embed_taken(lambda: local_ctx.engines, TakenRequest("late", request, time.monotonic() - 1)) is None


def test_a_failure_of_the_worker_is_a_reply_not_a_silence(local_ctx):
    def broken_context():
        raise ConnectionError("Redis is away")

    reply = embed_taken(broken_context, _taken(EmbeddingRequest(model=MODEL, inputs=["x"])))
    assert reply.failure == "ConnectionError: Redis is away" and reply.count == 0


def test_a_lane_request_runs_between_two_steps_of_a_run_in_progress(local_ctx, minilm_engine, sample_documents):
    # Given a batch run on the same engine, held between two of its steps until the lane has answered
    lane_answered = threading.Event()
    steps_before = []

    def hold(step):
        steps_before.append(step)
        if len(steps_before) == 2:
            lane_answered.wait(120)

    texts = [d["text"] for d in sample_documents[:40]]
    requests = (PoolingRequest(key=i, text=text) for i, text in enumerate(texts))
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    batch_results = []
    batch = threading.Thread(target=lambda: batch_results.extend(minilm_engine.run(requests, policy, on_step=hold)))
    local_ctx.engines.use(MODEL, minilm_engine)
    batch.start()
    # When a lane request comes while the run is under way
    reply = embed_taken(lambda: local_ctx.engines, _taken(EmbeddingRequest(model=MODEL, inputs=["an urgent query"])))
    results_when_answered = len(batch_results)
    lane_answered.set()
    batch.join(120)
    # Then it was answered before the run could finish (the run cannot pass its second step until
    # then), and the run then finished with every result
    assert reply.count == 1 and results_when_answered < len(texts)
    assert len(steps_before) >= 2 and len(batch_results) == len(texts)
