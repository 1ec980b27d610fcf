"""Each endpoint's request bodies: the records they make, the problems they name, the responses."""
import base64

import numpy as np
import pytest

from poolq.products.batches.formats.endpoint_format import RecordResult, RequestProblem
from poolq.products.batches.formats.endpoints import ENDPOINT_FORMATS
from poolq.products.batches.formats.output_lines import request_error_line, success_line, unrun_line

EMBED, SCORE, RERANK = (ENDPOINT_FORMATS[url] for url in ("/v1/embeddings", "/v1/score", "/v1/rerank"))


def test_embeddings_body_makes_one_record_per_input():
    parsed = EMBED.parse({"model": "m", "input": ["a", "b"], "dimensions": 8, "encoding_format": "base64"})
    assert parsed.records == [{"text": "a"}, {"text": "b"}]
    assert parsed.options == {"dimensions": 8, "encoding_format": "base64"}
    assert EMBED.parse({"model": "m", "input": "one"}).records == [{"text": "one"}]


@pytest.mark.parametrize("body, code, where", [
    ({"model": "m", "input": [1, 2, 3]}, "invalid_input", "body.input"),
    ({"model": "m", "input": []}, "invalid_request", "body.input"),
    ({"model": "m", "input": ""}, "invalid_request", "body.input"),
    ({"model": "m"}, "invalid_request", "body.input"),
    ({"model": "m", "input": "x", "temperature": 1}, "invalid_request", "body.temperature"),
    ({"model": "m", "input": "x", "encoding_format": "int8"}, "invalid_request", "body.encoding_format"),
    ({"model": "m", "input": "x", "poolq": {"long_documents": {"mode": "late_chunks"}}}, "invalid_request",
     "body.poolq.long_documents"),
])
def test_embeddings_problems_name_the_field(body, code, where):
    with pytest.raises(RequestProblem) as problem:
        EMBED.parse(body)
    assert problem.value.code == code and problem.value.param == where and str(problem.value).startswith(where)


def test_embeddings_response_shape_dimensions_and_base64():
    vector = np.arange(1, 9, dtype=np.float32)
    vector /= np.linalg.norm(vector)
    results = [RecordResult(1, vector.tolist(), 3, {}), RecordResult(0, vector.tolist(), 2, {})]
    body = EMBED.respond({"dimensions": 4, "encoding_format": "base64"}, sorted(results, key=lambda r: r.index), "m", "r")
    assert [d["index"] for d in body["data"]] == [0, 1] and body["usage"] == {"prompt_tokens": 5, "total_tokens": 5}
    decoded = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, vector[:4] / np.linalg.norm(vector[:4]))
    with pytest.raises(RequestProblem, match="more than the model's 8"):
        EMBED.respond({"dimensions": 9}, results, "m", "r")


def test_score_pairs_broadcast_one_first_text():
    assert SCORE.parse({"model": "m", "text_1": "q", "text_2": ["a", "b"]}).records == [
        {"query": "q", "text": "a"}, {"query": "q", "text": "b"}]
    assert SCORE.parse({"model": "m", "text_1": ["q1", "q2"], "text_2": ["a", "b"]}).records[1] == {"query": "q2", "text": "b"}
    with pytest.raises(RequestProblem, match="give one text_1, or as many as text_2"):
        SCORE.parse({"model": "m", "text_1": ["q1", "q2"], "text_2": ["a", "b", "c"]})


def test_rerank_orders_by_score_and_keeps_top_n():
    results = [RecordResult(i, score, 1, {"text": f"d{i}"}) for i, score in enumerate([0.1, 0.9, 0.5])]
    body = RERANK.respond({"top_n": 2, "return_documents": True}, results, "m", "req_1")
    assert [(r["index"], r["document"]["text"]) for r in body["results"]] == [(1, "d1"), (2, "d2")]
    assert "document" not in RERANK.respond({"top_n": 0, "return_documents": False}, results, "m", "r")["results"][0]


def test_output_lines_are_the_same_bytes_each_time():
    assert success_line("batch_x", 3, "c", {"a": 1}) == success_line("batch_x", 3, "c", {"a": 1})
    assert success_line("batch_x", 3, "c", {}) != success_line("batch_x", 4, "c", {})
    assert b'"status_code":400' in request_error_line("batch_x", 1, None, "invalid_json", "line 1: ...")
    assert b'"response":null' in unrun_line("batch_x", 1, "c", "batch_expired", "...")
