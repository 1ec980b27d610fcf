"""Property-based fuzzing of ``POST /v1/jobs`` bodies (and job-id paths) through the ASGI app.

Invariants: no response is a 5xx, whatever the body, its content type or the path; a 2xx
answers only a body that is a valid job (decided by the test's own rules below, not by the
server's models); mutations of a valid body whose validity the test knows answer 202 when valid
and 422 when not. The app runs over a local store with jobs that are accepted and never run,
rate limits out of the way, and a real API key (the ``client`` fixture, in conftest.py).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from urllib.parse import quote

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

TENANT = "fuzz-tenant"  # the tenant of the ``client`` fixture (conftest.py)
MODEL = "all-MiniLM-L6-v2"
MAX_ID = 512
UPLOADS = f"s3://bucket/jobs/tenants/{TENANT}/uploads/"

FUZZ = dict(deadline=None, derandomize=True, database=None, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                   HealthCheck.large_base_example])


def fuzz_settings(max_examples: int) -> settings:
    return settings(max_examples=max_examples, **FUZZ)


def _post(client, raw: bytes, content_type: str | None):
    headers = {"content-type": content_type} if content_type is not None else {}
    return client.post("/v1/jobs", content=raw, headers=headers)


def _describe(response) -> str:
    return f"{response.status_code}: {response.text[:600]}"


# -- strategies ----------------------------------------------------------------------------
LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
ODD = ["\u0301\u0301", "\ufeff", "\u200b", "\u2028", "\uffff", "\U0010ffff", "\U0001f600", "\x00", "\x85", "", " ",
       "日本語", "a" * MAX_ID, "b" * (MAX_ID + 1)]
odd_text = st.one_of(st.text(max_size=10), st.sampled_from(ODD))
surrogate_text = st.builds(lambda a, s, b: a + s + b, st.text(max_size=3), st.sampled_from(LONE_SURROGATES),
                           st.text(max_size=3))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(10 ** 400), 10 ** 400),
                    st.floats(allow_nan=True, allow_infinity=True), odd_text, surrogate_text)
keys = st.one_of(st.sampled_from(["input", "documents", "id", "text", "uri", "output", "dimensions", "dtype",
                                  "int8_range", "long_documents", "mode", "chunk_tokens", "model", "task"]),
                 odd_text, surrogate_text)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(keys, c, max_size=4),
                           max_leaves=12)
valid_ids = st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=20)
valid_texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)

documents_like = st.lists(st.one_of(
    st.fixed_dictionaries({"id": st.one_of(valid_ids, json_values), "text": st.one_of(valid_texts, json_values)}),
    st.fixed_dictionaries({"id": valid_ids, "text": valid_texts}),
    json_values), max_size=3)
job_shaped = st.fixed_dictionaries(
    {"input": st.one_of(st.fixed_dictionaries({"documents": documents_like}), json_values,
                        st.fixed_dictionaries({"uri": st.one_of(st.sampled_from([UPLOADS + "in.jsonl", "s3://bucket/x",
                                                                                 "file:///etc/passwd"]), odd_text)}))},
    optional={"output": st.one_of(json_values, st.fixed_dictionaries(
                  {}, optional={"dimensions": scalars, "dtype": st.one_of(st.sampled_from(["float32", "int8"]), scalars),
                                "int8_range": json_values})),
              "long_documents": st.one_of(json_values, st.fixed_dictionaries(
                  {}, optional={"mode": st.one_of(st.sampled_from(["truncate", "late_chunks"]), scalars),
                                "chunk_tokens": scalars, "window_tokens": scalars})),
              "model": st.one_of(st.just(MODEL), odd_text), "task": st.one_of(st.just("embed"), scalars),
              "incremental_from": scalars},
)
JSON_TYPES = ["application/json", "application/json; charset=utf-8"]
# No content type at all. strict_json.py says FastAPI parses such a body as JSON; the FastAPI
# installed here (0.165) does not, and answers a valid job without one with a 422. Either way
# never a 5xx and never a 2xx for an invalid body; a valid one is not required to be a 202.
NO_TYPE = [None]
# Media types are case-insensitive (RFC 9110); +json suffixes are JSON too; the rest are not JSON.
OTHER_TYPES = ["APPLICATION/JSON", "Application/Json; charset=UTF-8", "application/vnd.api+json",
               "application/merge-patch+json", "text/plain", "application/x-www-form-urlencoded", "text/json",
               "application/octet-stream", ""]
content_types = st.sampled_from(JSON_TYPES + NO_TYPE + OTHER_TYPES)


def dump(value: object, ensure_ascii: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


# -- the test's own idea of a valid job (no server code) ----------------------------------
def _surrogate_free(value: object) -> bool:
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in current):
                return False
        elif isinstance(current, dict):
            pending += [*current.keys(), *current.values()]
        elif isinstance(current, list):
            pending += current
    return True


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid_id(value: object) -> bool:
    return (isinstance(value, str) and 1 <= len(value) <= MAX_ID
            and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value))


def classify(value: object) -> bool | None:
    """True: a valid job; False: not one; None: this function does not decide (then only the
    never-5xx and the 2xx-is-not-invalid properties apply)."""
    if not isinstance(value, dict) or "input" not in value:
        return False
    if not set(value) <= {"model", "task", "input", "output", "long_documents", "incremental_from"}:
        return False
    if not _surrogate_free(value):
        return False
    if value.get("task", "embed") != "embed" or not isinstance(value.get("model", MODEL), str):
        return False
    verdict: bool | None = True if value.get("model", MODEL) == MODEL else None  # other models: the registry decides
    if value.get("incremental_from") is not None:
        return False  # no such earlier job here (and a non-string is no job id)
    inp = value["input"]
    if not isinstance(inp, dict):
        return False
    if "documents" in inp:
        docs = inp["documents"]
        if set(inp) != {"documents"} or not isinstance(docs, list) or not 1 <= len(docs) <= 1000:
            return False
        for doc in docs:
            if not isinstance(doc, dict) or not {"id", "text"} <= set(doc) <= {"id", "text", "chunk_spans"}:
                return False
            if not _valid_id(doc["id"]) or not isinstance(doc["text"], str):
                return False
            if doc.get("chunk_spans") is not None:
                verdict = None
    else:
        verdict = None  # a URI input: the test does not re-derive access rules
    output = value.get("output", {})
    if not isinstance(output, dict) or not set(output) <= {"format", "dtype", "dimensions", "int8_range"}:
        return False
    dims = output.get("dimensions")
    if dims is not None and not (_is_int(dims) and 1 <= dims <= 384):
        return False
    dtype = output.get("dtype", "float32")
    if dtype not in ("float32", "float16", "int8", "binary") or output.get("format", "parquet") != "parquet":
        return False
    if "int8_range" in output and output["int8_range"] is not None:
        rng = output["int8_range"]
        if dtype != "int8" or not isinstance(rng, list) or len(rng) != 2:
            return False
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in rng):
            return False
        if not rng[0] < rng[1]:
            return False
        verdict = None  # the codec's own step checks are not re-derived here
    long_documents = value.get("long_documents", {})
    if not isinstance(long_documents, dict):
        return False
    if long_documents:
        allowed = {"mode", "side", "window_tokens", "max_embed_len", "window_specials", "chunk_by", "chunk_tokens",
                   "chunk_sentences", "overlap_tokens", "allow_any_pooling"}
        if not set(long_documents) <= allowed:
            return False
        for name in ("window_tokens", "max_embed_len", "chunk_tokens", "chunk_sentences", "overlap_tokens"):
            field = long_documents.get(name)
            if field is not None and not (_is_int(field) and field >= 0):
                return False
        if long_documents.get("mode", "error") not in ("error", "truncate", "chunked", "naive_chunks", "late_chunks"):
            return False
        verdict = None  # window arithmetic is the engine's; not re-derived
    return verdict


def _assert_sane(response, raw: bytes, value: object | None, content_type: str | None) -> None:
    assert response.status_code < 500, f"a server error for body {raw[:300]!r} ({content_type}): {_describe(response)}"
    if 200 <= response.status_code < 300:
        verdict = classify(value) if value is not None else False
        assert verdict is not False, f"accepted an invalid job {raw[:300]!r} ({content_type}): {_describe(response)}"


def _parse(raw: bytes) -> object | None:
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


# -- properties over random bodies ---------------------------------------------------------
@fuzz_settings(150)
@given(value=st.one_of(json_values, job_shaped), ensure_ascii=st.booleans(), content_type=content_types)
@example(value={"input": {"documents": [{"id": "a", "text": "x"}]}}, ensure_ascii=True, content_type="application/json")
def test_random_json_bodies_never_5xx(client, value, ensure_ascii, content_type):
    raw = dump(value, ensure_ascii)
    response = _post(client, raw, content_type)
    _assert_sane(response, raw, _parse(raw), content_type)
    if content_type in JSON_TYPES and classify(_parse(raw)) is True:
        assert response.status_code == 202, _describe(response)


@fuzz_settings(100)
@given(raw=st.one_of(st.binary(max_size=200), st.sampled_from([
    b"", b"{", b"[" * 100_000, b"\xff\xfe", b'{"input": 1' + b"0" * 5_000 + b"}", b"\xef\xbb\xbf{}", b"null", b"NaN",
    b'{"input": {"documents": [{"id": "a", "text": "x"}]}}\x00',
    b'{"input": {"documents": [{"id": "a", "text": "\xed\xa0\x80"}]}}',
])), content_type=content_types)
def test_raw_byte_bodies_never_5xx(client, raw, content_type):
    response = _post(client, raw, content_type)
    _assert_sane(response, raw, _parse(raw), content_type)


# -- mutations of a valid body -------------------------------------------------------------
@dataclass(frozen=True)
class Raw:
    """JSON text put into the body as is (numbers past Python's limit, deep nesting)."""

    text: str


BASE = {
    "input": {"documents": [{"id": "doc-1", "text": "first document"}, {"id": "doc-2", "text": "second one"}]},
    "output": {"dtype": "float32", "dimensions": 128},
    "long_documents": {"mode": "truncate", "chunk_tokens": 64, "window_tokens": 128},
}
FIVE_THOUSAND_DIGITS = Raw("1" + "0" * 5_000)
DEEP = [Raw("[" * n + "]" * n) for n in (1_000, 100_000)] + [Raw('{"a":' * 1_000 + "1" + "}" * 1_000)]
WRONG_INT_TYPES = [True, False, "128", "1", 1.5, 128.0, "", [], {}, [128], {"value": 128}, 1e308, Raw("1e400"),
                   Raw("-1e400"), Raw("NaN"), FIVE_THOUSAND_DIGITS, Raw("-" + FIVE_THOUSAND_DIGITS.text), *DEEP]


def _values(valid: st.SearchStrategy, invalid: st.SearchStrategy, unknown: st.SearchStrategy | None = None):
    options = [valid.map(lambda v: (v, True)), invalid.map(lambda v: (v, False))]
    if unknown is not None:
        options.append(unknown.map(lambda v: (v, None)))
    return st.one_of(*options)


def _int_field(lo: int, hi: int, nullable: bool, unbounded: bool):
    invalid = [*WRONG_INT_TYPES, lo - 1, -1] + ([] if nullable else [None]) + ([] if unbounded else [hi + 1, 10 ** 30])
    return _values(st.integers(lo, hi) | (st.just(None) if nullable else st.nothing()), st.sampled_from(invalid),
                   st.sampled_from([10 ** 30, 2 ** 63, 2 ** 64]) if unbounded else None)


# One mutation per group (fields within a group interact: window vs max_embed_len, dtype vs range).
GROUPS = {
    "dimensions": st.tuples(st.just(("output", "dimensions")), _int_field(1, 384, nullable=True, unbounded=False)),
    "window": st.one_of(
        st.tuples(st.just(("long_documents", "chunk_tokens")), _int_field(1, 4096, nullable=False, unbounded=True)),
        st.tuples(st.just(("long_documents", "chunk_sentences")), _int_field(1, 100, nullable=False, unbounded=True)),
        st.tuples(st.just(("long_documents", "window_tokens")), _int_field(32, 256, nullable=True, unbounded=False)),
        st.tuples(st.just(("long_documents", "max_embed_len")), _int_field(1, 128, nullable=True, unbounded=False)),
        st.tuples(st.just(("long_documents", "overlap_tokens")), _values(st.integers(0, 64), st.sampled_from(
            [*WRONG_INT_TYPES, -1]))),
        st.tuples(st.just(("long_documents", "mode")), _values(
            st.sampled_from(["error", "truncate", "chunked", "naive_chunks", "late_chunks"]),
            st.sampled_from(["squash", "ERROR", "", 1, None, True, ["truncate"], "trunc\ud800ate"]))),
        st.tuples(st.just(("long_documents", "window_specials")), _values(
            st.sampled_from([True, False, None]), st.sampled_from(["true", 1, 0, "yes", []])))),
    "dtype": st.one_of(
        st.tuples(st.just(("output", "dtype")), _values(st.sampled_from(["float32", "float16", "int8", "binary"]),
                                                        st.sampled_from(["int4", "", "FLOAT32", 1, None, True, "\udc00"]))),
        st.tuples(st.just(("output", "int8_range")), _values(
            st.sampled_from([[-1, 1], [-1.0, 1.0], [-0.5, 0.25]]),
            st.sampled_from([[-1e308, 1e308], [1, -1], [0, 0], ["a", 1], [1], [1, 2, 3], "x", [True, 2], None,
                             [Raw("-1e400"), 1], [Raw("NaN"), 1], [-1, FIVE_THOUSAND_DIGITS], {"min": -1, "max": 1}]),
            st.sampled_from([[-1e-300, 1e-300], [-1e300, 1e300], [0, 5e-324]])))),
    "doc_id": st.tuples(st.just(("input", "documents", 0, "id")), _values(
        valid_ids, st.one_of(st.sampled_from(["", "a" * (MAX_ID + 1), "x\ny", "\x7f", 5, True, None, [], {}, 1.5]),
                             surrogate_text, st.text(st.characters(categories=["Cc"]), min_size=1, max_size=3)))),
    "doc_text": st.tuples(st.just(("input", "documents", 1, "text")), _values(
        valid_texts, st.one_of(st.sampled_from([5, True, None, [], {}, ["a"]]), surrogate_text))),
    "model": st.tuples(st.just(("model",)), _values(st.just(MODEL), st.one_of(
        st.sampled_from(["", "no-such-model", "../../etc", 5, None, MODEL + "\ud800"]),
        st.text(max_size=12).filter(lambda s: s not in (MODEL, "smollm2-135m")), surrogate_text))),
    "task": st.tuples(st.just(("task",)), _values(st.just("embed"), st.sampled_from(["rerank", "", None, 1, "EMBED"]))),
    "incremental_from": st.tuples(st.just(("incremental_from",)), _values(st.just(None), st.sampled_from(
        ["0" * 32, "g" * 32, "", 5, True, "0" * 31, FIVE_THOUSAND_DIGITS]))),
    "extra": st.tuples(st.sampled_from([("surprise",), ("output", "surprise"), ("long_documents", "surprise"),
                                        ("input", "surprise"), ("input", "documents", 0, "surprise")]),
                       _values(st.nothing(), st.one_of(scalars, st.just(DEEP[0])))),
    "input": st.tuples(st.just(("input",)), _values(
        st.just({"uri": UPLOADS + "corpus.jsonl"}),
        st.one_of(st.sampled_from([{"documents": []}, {}, None, [], "s3://x", {"uri": "file:///etc/passwd"},
                                   {"uri": "http://example.com/x.jsonl"}, {"uri": "s3://other-bucket/x.jsonl"},
                                   {"uri": UPLOADS + "../x.jsonl"}, {"uri": UPLOADS + "a\ud800.jsonl"},
                                   {"uri": 5}, {"documents": [{"id": "a", "text": "x"}], "uri": UPLOADS + "x.jsonl"}]),
                  surrogate_text.map(lambda s: {"uri": UPLOADS + s})))),
}


def _set(body: dict, path: tuple, value: object, raws: list) -> None:
    target = body
    for step in path[:-1]:
        target = target[step]
    if isinstance(value, Raw):
        raws.append(value.text)
        value = f"__RAW_{len(raws) - 1}__"
    elif isinstance(value, list):
        items = []
        for item in value:
            if isinstance(item, Raw):
                raws.append(item.text)
                item = f"__RAW_{len(raws) - 1}__"
            items.append(item)
        value = items
    target[path[-1]] = value


@st.composite
def mutated_bodies(draw) -> tuple[bytes, bool | None, list]:
    names = draw(st.lists(st.sampled_from(sorted(GROUPS)), min_size=1, max_size=3, unique=True))
    if "input" in names:
        names = [name for name in names if name not in ("doc_id", "doc_text", "extra")] or ["input"]
    body = json.loads(json.dumps(BASE))
    raws: list[str] = []
    verdicts, applied = [], []
    for name in names:
        path, (value, valid) = draw(GROUPS[name])
        if path[-1] == "int8_range":
            body["output"]["dtype"] = "int8"
        _set(body, path, value, raws)
        verdicts.append(valid)
        applied.append((path, value))
    raw_text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    for index, text in enumerate(raws):
        raw_text = raw_text.replace(f'"__RAW_{index}__"', text)
    verdict = False if False in verdicts else None if None in verdicts else True
    return raw_text.encode("utf-8", "surrogatepass"), verdict, applied


def test_the_base_body_is_a_valid_job(client):
    response = _post(client, json.dumps(BASE).encode(), "application/json")
    assert response.status_code == 202, _describe(response)


@fuzz_settings(200)
@given(mutation=mutated_bodies(), content_type=st.sampled_from(JSON_TYPES + NO_TYPE))
def test_mutated_valid_bodies_are_202_or_422(client, mutation, content_type):
    raw, verdict, applied = mutation
    response = _post(client, raw, content_type)
    assert response.status_code < 500, f"{applied}: {_describe(response)}"
    if verdict is True and content_type is not None:
        assert response.status_code == 202, f"a valid body was refused: {applied}: {_describe(response)}"
    elif verdict is False:
        assert response.status_code == 422, f"an invalid body got {applied}: {_describe(response)}"
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail and all("loc" in error and error.get("msg") for error in detail)


@fuzz_settings(120)
@given(mutation=mutated_bodies(), content_type=st.sampled_from(OTHER_TYPES))
def test_mutated_bodies_under_other_content_types_never_5xx_or_accept_invalid(client, mutation, content_type):
    raw, verdict, applied = mutation
    response = _post(client, raw, content_type)
    assert response.status_code < 500, f"{applied} as {content_type!r}: {_describe(response)}"
    if verdict is False:
        assert not 200 <= response.status_code < 300, f"accepted {applied} as {content_type!r}: {_describe(response)}"


# -- paths ---------------------------------------------------------------------------------
path_text = st.one_of(st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
                      st.text("0123456789abcdef", min_size=31, max_size=33),
                      st.sampled_from(["..", ".", "%2e%2e", "../../etc/passwd", "0" * 32, "F" * 32, "a" * 10_000,
                                       "\x00", "%00", "results", "cancel"]))
@fuzz_settings(120)
@given(job_id=path_text, suffix=st.sampled_from(["", "/results", "/cancel"]))
def test_job_paths_never_5xx(client, job_id, suffix):
    path = "/v1/jobs/" + quote(job_id, safe="") + suffix
    response = client.post(path) if suffix == "/cancel" else client.get(path)
    assert response.status_code < 500, f"{path[:200]!r}: {_describe(response)}"


@fuzz_settings(60)
@given(limit=st.one_of(st.integers(), st.text(max_size=8)), before=st.one_of(st.none(), path_text))
def test_listing_queries_never_5xx(client, limit, before):
    params = {"limit": str(limit)} | ({"before": before} if before is not None else {})
    response = client.get("/v1/jobs", params=params)
    assert response.status_code < 500, f"{params}: {_describe(response)}"
