"""Property-based fuzzing of ``POST /v1/embeddings`` bodies through the ASGI app, with the lane
answered by a real MiniLM engine (``LaneServer``, as in a compute worker).

Invariants: whatever the body, no 5xx (the lane always answers here, so not even 503); a 200 is
OpenAI's shape with one vector per input, of the asked dimensions, all finite; bodies whose
``input`` fits none of OpenAI's shapes are 400, in OpenAI's error shape.
"""
from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient
from hypothesis import example, given
from hypothesis import strategies as st
from test_job_bodies_fuzz import dump, fuzz_settings, json_values, odd_text, scalars, surrogate_text

from poolq.api.server.app import create_app
from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
from poolq.jobs.settings import Settings
from poolq.worker.lane.lane_server import LaneServer
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def client(tmp_path_factory, minilm_engine):
    settings = Settings(rate_limit_per_s=1e6, rate_limit_burst=10 ** 6, embeddings_max_inputs=16,
                        embeddings_max_request_tokens=4000)
    ctx = local_context(tmp_path_factory.mktemp("embeddings-fuzz") / "store", settings)
    ctx.engines.use(MODEL, minilm_engine)
    lane = InMemoryEmbeddingLane()
    app = create_app(ctx, ctx.settings, checks=[], lane=lane)
    key, _ = app.state.keys.create("fuzz-tenant")
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05):
        with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {key}"}) as test_client:
            yield test_client


texts = st.one_of(odd_text, surrogate_text, st.text(max_size=200), st.just("word " * 400))
token_ids = st.one_of(st.integers(0, 30521), st.integers(-5, 2 ** 40), scalars)
good_texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=80)
good_ids = st.lists(st.integers(0, 30521), min_size=1, max_size=30)
good_inputs = st.one_of(good_texts, st.lists(good_texts, min_size=1, max_size=6), good_ids,
                        st.lists(good_ids, min_size=1, max_size=4))
inputs = st.one_of(good_inputs, texts, st.lists(texts, max_size=20), st.lists(token_ids, max_size=20),
                   st.lists(st.lists(token_ids, max_size=8), max_size=5), json_values)
models = st.one_of(st.just(MODEL), st.sampled_from([MODEL, "splade-tiny", ""]), odd_text, scalars)
embeddings_shaped = st.fixed_dictionaries(
    {"model": st.one_of(st.just(MODEL), models), "input": inputs},
    optional={"dimensions": st.one_of(st.integers(-2, 400), scalars),
              "encoding_format": st.one_of(st.sampled_from(["float", "base64"]), scalars),
              "user": st.one_of(odd_text, scalars),
              "long_documents": st.one_of(json_values, st.fixed_dictionaries(
                  {}, optional={"mode": st.one_of(st.sampled_from(["error", "truncate", "chunked", "late_chunks"]),
                                                  scalars),
                                "window_tokens": st.one_of(st.integers(-1, 600), scalars),
                                "max_embed_len": st.one_of(st.integers(0, 2000), scalars)}))},
)


def _fits_openai_input(value: object) -> bool:
    def token(item: object) -> bool:
        return isinstance(item, int) and not isinstance(item, bool) and item >= 0

    if isinstance(value, str):
        return True
    if not isinstance(value, list) or not value:
        return False
    return (all(isinstance(item, str) for item in value) or all(token(item) for item in value)
            or all(isinstance(item, list) and all(token(t) for t in item) for item in value))


# Bodies of good values only: most are answered 200 (what is not: say, a text of format characters
# alone, which makes no tokens), so the 200 properties are exercised too.
near_valid = st.fixed_dictionaries(
    {"model": st.just(MODEL), "input": good_inputs},
    optional={"dimensions": st.integers(1, 384), "encoding_format": st.sampled_from(["float", "base64"]),
              "user": good_texts,
              "long_documents": st.fixed_dictionaries({"mode": st.sampled_from(["error", "truncate", "chunked"])},
                                                      optional={"window_tokens": st.integers(8, 256)})},
)
bodies = st.one_of(near_valid, embeddings_shaped, json_values,
                   st.builds(lambda body, value: {**body, "extra": value}, embeddings_shaped, scalars))


@fuzz_settings(max_examples=300)
@given(body=bodies, ensure_ascii=st.booleans())
# Found once (a CI run): a 1,000-character model reached the filesystem as a path (Errno 36) -> 500.
@example(body={"model": "a" * 1000, "input": "x"}, ensure_ascii=True)
@example(body={"model": "org/" + "b" * 600, "input": "x"}, ensure_ascii=False)
@example(body={"model": "bad\x00name", "input": "x"}, ensure_ascii=True)
def test_no_body_gets_a_5xx_and_a_200_is_openais_shape(client, body, ensure_ascii):
    response = client.post("/v1/embeddings", content=dump(body, ensure_ascii), headers={"content-type": "application/json"})
    assert response.status_code < 500, f"{response.status_code}: {response.text[:600]}"
    if isinstance(body, dict) and not _fits_openai_input(body.get("input")):
        assert response.status_code == 400 and set(response.json()["error"]) == {"message", "type", "param", "code"}, (
            response.text[:600])
    if response.status_code != 200:
        return
    answer = response.json()
    count = 1 if isinstance(body["input"], str) or not isinstance(body["input"][0], (str, list)) else len(body["input"])
    assert answer["object"] == "list" and len(answer["data"]) == count
    for item in answer["data"]:
        vector = item["embedding"]
        if body.get("encoding_format") != "base64":
            assert len(vector) == (body.get("dimensions") or 384) and all(math.isfinite(x) for x in vector)
    assert json.loads(response.text)["usage"]["prompt_tokens"] > 0
