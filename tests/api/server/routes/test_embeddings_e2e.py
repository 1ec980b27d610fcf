"""``POST /v1/embeddings`` on a live `poolq dev up` stack (Redis, SeaweedFS, the API, a worker
consuming control and gpu, beat), through the official ``openai`` client, unchanged: its vectors
are those a job writes for the same texts and options (read back from the job's Parquet parts),
while that job runs on the same worker."""
import numpy as np
import openai
import pytest
from support.dev_stack import dev_stack

from poolq.api.client.poolq_client import PoolqClient

pytestmark = pytest.mark.integration

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("embeddings-stack"), env={"POOLQ_SHARD_MAX_DOCUMENTS": "8"}) as info:
        yield info


@pytest.fixture(scope="module")
def client(stack):
    """The client as users make it: its default retries honour Retry-After, so a first request that
    meets a worker still loading its model (503 after embeddings_timeout_s) is answered on a retry."""
    with openai.OpenAI(base_url=stack["api_url"] + "/v1", api_key=stack["api_key"]) as opened:
        yield opened


def _job(stack, texts: list[str], **options) -> tuple[dict, dict[str, np.ndarray], dict]:
    """Run an embed job over ``texts`` (ids doc-0...); its final status, its vectors by id (read
    from its Parquet parts) and its manifest."""
    with PoolqClient(stack["api_url"], stack["api_key"]) as poolq:
        documents = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(texts)]
        job = poolq.submit({"model": MODEL, "input": {"documents": documents}, **options})
        final = poolq.wait(job["id"], poll_interval=0.5, timeout=600)
        ids, vectors = poolq.read_numpy(job["id"])
        return final, dict(zip(ids, vectors)), poolq.results(job["id"])["manifest"]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_the_openai_client_gets_the_vectors_a_job_writes(stack, client, sample_documents):
    # Given texts a corpus job embeds
    texts = [d["text"][:400] for d in sample_documents[:12]]
    # When the official client asks for them, as it does by default (it asks for base64 and decodes it)
    response = client.embeddings.create(model=MODEL, input=texts)
    final, job_vectors, manifest = _job(stack, texts)
    # Then they are the job's vectors, one per input in order, and the usage is the job's
    assert final["status"] == "succeeded", final
    assert response.model == MODEL and [item.index for item in response.data] == list(range(len(texts)))
    vectors = np.array([item.embedding for item in response.data], dtype=np.float32)
    expected = np.stack([job_vectors[f"doc-{i}"] for i in range(len(texts))])
    assert _cosines(vectors, expected).min() >= 0.99999
    assert response.usage.prompt_tokens == response.usage.total_tokens == final["usage"]["tokens"]
    # and the same engine made them (model files and compute dtype)
    raw = client.embeddings.with_raw_response.create(model=MODEL, input=texts[:1])
    assert manifest["engines"] == [raw.headers["X-Poolq-Engine"]]


def test_queries_with_the_corpus_options_match_it_while_the_job_runs(stack, client, sample_documents):
    # Given a job over long documents (several windows each), chunked, 128 dimensions, running on the worker
    texts = [d["text"][:3000] for d in sample_documents[:6]]
    options = {"long_documents": {"mode": "chunked"}, "output": {"dimensions": 128}}
    with PoolqClient(stack["api_url"], stack["api_key"]) as poolq:
        documents = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(texts)]
        job = poolq.submit({"model": MODEL, "input": {"documents": documents}, **options})
        # When the same texts are embedded with the same options over the lane (floats this time)
        response = client.embeddings.create(model=MODEL, input=texts, dimensions=128, encoding_format="float",
                                            extra_body={"long_documents": {"mode": "chunked"}})
        final = poolq.wait(job["id"], poll_interval=0.5, timeout=600)
        ids, job_vectors = poolq.read_numpy(job["id"])
    # Then the vectors equal the job's
    assert final["status"] == "succeeded", final
    by_id = dict(zip(ids, job_vectors))
    vectors = np.array([item.embedding for item in response.data], dtype=np.float32)
    assert vectors.shape == (len(texts), 128)
    assert _cosines(vectors, np.stack([by_id[f"doc-{i}"] for i in range(len(texts))])).min() >= 0.99999


def test_refusals_reach_the_client_as_its_own_errors(stack, client, sample_documents):
    long_text = sample_documents[0]["text"] * 2
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=MODEL, input=["fine", long_text])
    assert (refused.value.param, refused.value.code) == ("input.1", "document_too_long")
    with pytest.raises(openai.BadRequestError) as unknown:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert unknown.value.param == "model" and "unknown model 'text-embedding-3-small'" in unknown.value.message
    with openai.OpenAI(base_url=stack["api_url"] + "/v1", api_key="not-a-key", max_retries=0) as stranger:
        with pytest.raises(openai.AuthenticationError):
            stranger.embeddings.create(model=MODEL, input="x")
