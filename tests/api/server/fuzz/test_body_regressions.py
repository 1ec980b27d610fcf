"""The issue's hostile ``POST /v1/jobs`` bodies, each pinned by a plain test: a 422 that names
the problem, never a 5xx. Each body is sent as ``application/json`` and, since media types are
case-insensitive (RFC 9110), as ``Application/JSON`` too: the same body must get the same answer.
(The ``client`` fixture is in conftest.py.)"""
from __future__ import annotations

import json

import pytest

DOCS = '{"documents": [{"id": "a", "text": "x"}]}'
CONTENT_TYPES = ["application/json", "Application/JSON"]


def _body(output: str | None = None, documents: str = DOCS) -> bytes:
    return ('{"input": ' + documents + (', "output": ' + output if output is not None else "") + "}").encode()


CASES = {
    "nesting-1000": (_body("[" * 1_000 + "]" * 1_000), ["body"], "nested too deeply"),
    "nesting-100000": (_body("[" * 100_000 + "]" * 100_000), ["body"], "nested too deeply"),
    "nesting-1000-objects": (_body('{"a":' * 1_000 + "1" + "}" * 1_000), ["body"], "nested too deeply"),
    "dimensions-5000-digits": (_body('{"dimensions": 1' + "0" * 5_000 + "}"), ["body"], "more than 4300 digits"),
    "surrogate-in-id": (_body(documents='{"documents": [{"id": "a\\ud800", "text": "x"}]}'), ["body"],
                        "body.input.documents[0].id holds a lone UTF-16 surrogate"),
    "surrogate-in-text": (_body(documents='{"documents": [{"id": "a", "text": "ab\\udfffcd"}]}'), ["body"],
                          "body.input.documents[0].text holds a lone UTF-16 surrogate"),
    # the surrogate's CESU-8 bytes themselves (json.loads(bytes) would read them with surrogatepass)
    "cesu-surrogate-bytes-in-text": (b'{"input": {"documents": [{"id": "a", "text": "\xed\xbf\xbf"}]}}', ["body"],
                                     "not UTF-8"),
    "dimensions-true": (_body('{"dimensions": true}'), ["body", "output", "dimensions"], "valid integer"),
    "dimensions-string": (_body('{"dimensions": "128"}'), ["body", "output", "dimensions"], "valid integer"),
    "dimensions-float": (_body('{"dimensions": 1.5}'), ["body", "output", "dimensions"], "integer"),
    "chunk-tokens-string": (('{"input": ' + DOCS + ', "long_documents": {"chunk_tokens": "64"}}').encode(),
                            ["body", "long_documents", "chunk_tokens"], "valid integer"),
    "int8-range-overflows": (_body('{"dtype": "int8", "int8_range": [-1e308, 1e308]}'),
                             ["body", "output", "int8_range"], "too wide"),
}


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_bodies_are_422_naming_the_problem(client, name, content_type):
    raw, loc, words = CASES[name]
    response = client.post("/v1/jobs", content=raw, headers={"content-type": content_type})
    assert response.status_code == 422, f"{response.status_code}: {response.text[:500]}"
    detail = response.json()["detail"]
    assert any(error["loc"] == loc and words in error["msg"] for error in detail), detail


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", "application/x-www-form-urlencoded"])
@pytest.mark.parametrize("raw", [b"\x80", b"\xff\xfe{}", _body(documents='{"documents": [{"id": "\\ud800", "text": "x"}]}')],
                         ids=["byte-80", "utf16-bom", "surrogate-escape"])
def test_a_body_that_is_not_json_by_its_content_type_is_a_4xx(client, raw, content_type):
    response = client.post("/v1/jobs", content=raw, headers={"content-type": content_type})
    assert 400 <= response.status_code < 500, f"{response.status_code}: {response.text[:500]}"


def test_the_valid_body_of_these_cases_is_accepted(client):
    for content_type in CONTENT_TYPES:
        response = client.post("/v1/jobs", content=_body('{"dimensions": 128}'), headers={"content-type": content_type})
        assert response.status_code == 202, response.text
        assert json.loads(response.text)["status"] == "queued"
