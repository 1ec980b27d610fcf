"""What OpenAI-compatible tools do with poolq, each pointed at it with no other change than its base URL
(and the test's in-process transport): LangChain's ``OpenAIEmbeddings`` (``check_embedding_ctx_length=False``:
it would otherwise count tokens with OpenAI's tokenizer) and LlamaIndex's ``OpenAILikeEmbedding`` embed
queries and documents, equal to what poolq's engine computes; a model's prompt rides along as ``extra_body``
(LangChain's ``model_kwargs``)."""
import httpx
import numpy as np
import pytest
from support.api_client import InProcessTransport, authed_client

from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"
TEXTS = ["how do rivers form", "the tallest mountains on earth", "why is the sea salty"]


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_engine):
    ctx = local_context(tmp_path_factory.mktemp("store"), Settings())
    ctx.engines.use(MODEL, minilm_engine)
    lane = InMemoryEmbeddingLane()
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        client = authed_client(ctx, lane=lane)
        yield client, httpx.Client(transport=InProcessTransport(client), base_url="http://testserver")


def test_langchain_openai_embeddings(served, minilm_engine):
    from langchain_openai import OpenAIEmbeddings

    client, http_client = served
    embeddings = OpenAIEmbeddings(model=MODEL, base_url="http://testserver/v1", api_key=client.api_key,
                                  check_embedding_ctx_length=False, http_client=http_client)
    documents = np.array(embeddings.embed_documents(TEXTS))
    query = np.array(embeddings.embed_query(TEXTS[0]))
    expected = minilm_engine.embed(TEXTS)
    np.testing.assert_allclose(documents, expected, atol=1e-5)
    np.testing.assert_allclose(query, expected[0], atol=1e-5)
    prompted = OpenAIEmbeddings(model=MODEL, base_url="http://testserver/v1", api_key=client.api_key,
                                check_embedding_ctx_length=False, http_client=http_client,
                                model_kwargs={"extra_body": {"prompt": "query: "}})
    np.testing.assert_allclose(prompted.embed_query(TEXTS[0]), minilm_engine.embed(["query: " + TEXTS[0]])[0], atol=1e-5)


def test_llamaindex_openai_like_embedding(served, minilm_engine):
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    client, http_client = served
    embedding = OpenAILikeEmbedding(model_name=MODEL, api_base="http://testserver/v1", api_key=client.api_key,
                                    http_client=http_client)
    vectors = np.array(embedding.get_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(vectors, minilm_engine.embed(TEXTS), atol=1e-5)
    np.testing.assert_allclose(embedding.get_query_embedding(TEXTS[1]), minilm_engine.embed([TEXTS[1]])[0], atol=1e-5)
