"""output.include_fields: input fields copied into every output row, typed once per job from
their first values, per-record errors for values of another type or too large, 422s for names
that would shadow a column."""
import datetime
import json

import pyarrow as pa
import pytest
from support.task_jobs import run_task_job

from poolq.jobs.inputs.included_fields import (
    MAX_INCLUDED_BYTES,
    IncludedColumns,
    accepts,
    arrow_field_type,
    arrow_type,
    column_value,
    is_arrow_type,
    json_text,
    json_type,
    type_label,
    types_to_check,
)
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import JobRejected, validate_spec
from poolq.worker.local_runner import run_job_locally

INCLUDED = ["title", "year", "rating", "tags", "absent"]


def _documents():
    return [
        {"id": "a", "text": "Foxes eat rodents and berries in the forest.",
         "fields": {"title": "Foxes", "year": 1999, "rating": 4, "tags": ["animals", "forest"]}},
        {"id": "b", "text": "George Orwell wrote Animal Farm in 1945.", "fields": {"year": 1945, "rating": 5}},
        {"id": "c", "text": "Rivers carry sediment to the sea.", "fields": {"title": "Rivers", "tags": {"kind": "water"}}},
    ]


def test_fields_are_carried_with_types_from_their_first_values(local_ctx):
    manifest, table = run_task_job(local_ctx, _documents(), output={"include_fields": INCLUDED})
    # Then the columns follow the common ones, typed by each field's first value (a missing one is null)
    assert table.column_names[-5:] == INCLUDED and manifest["columns"][-5:] == INCLUDED
    assert [table.schema.field(name).type for name in INCLUDED] == [pa.string(), pa.int64(), pa.int64(), pa.string(),
                                                                    pa.string()]
    rows = {row["id"]: row for row in table.to_pylist()}
    assert (rows["a"]["title"], rows["a"]["year"], rows["a"]["tags"]) == ("Foxes", 1999, '["animals","forest"]')
    assert rows["b"]["title"] is None and rows["c"]["year"] is None and rows["a"]["absent"] is None
    assert rows["c"]["tags"] == '{"kind":"water"}'


def test_a_value_of_another_type_is_a_per_record_error_naming_the_field(local_ctx):
    # "rating" is an integer column (its first value is 4), so 4.5 does not fit
    documents = _documents()
    documents[1]["fields"]["rating"] = 4.5
    spec = JobSpec.model_validate({"input": {"documents": documents}, "output": {"include_fields": ["rating"]}})
    status = run_job_locally(local_ctx, spec)
    assert status.errors_by_code == {"field_type_mismatch": 1} and status.counts.completed == 2
    assert "line 2 (id 'b'): field 'rating' holds number; the job's column is integer" in status.error_samples[0]


def test_every_chunk_row_carries_the_fields(local_ctx):
    documents = [{"id": "long", "text": " ".join(["The river runs past the mill."] * 40), "fields": {"title": "Mill"}}]
    _, table = run_task_job(local_ctx, documents, output={"include_fields": ["title"]},
                            long_documents={"mode": "naive_chunks", "chunk_tokens": 32})
    assert table.num_rows > 3 and set(table.column("title").to_pylist()) == {"Mill"}


def test_fields_larger_than_the_cap_fail_that_record_only(local_ctx):
    documents = _documents()
    documents[2]["fields"]["title"] = "x" * (MAX_INCLUDED_BYTES + 1)
    spec = JobSpec.model_validate({"input": {"documents": documents}, "output": {"include_fields": ["title"]}})
    status = run_job_locally(local_ctx, spec)
    assert status.errors_by_code == {"fields_too_large": 1} and status.counts.completed == 2


def test_a_jsonl_input_carries_its_own_fields(local_ctx, tmp_path):
    source = tmp_path / "docs.jsonl"
    rows = [{"id": d["id"], "text": d["text"], **d["fields"]} for d in _documents()]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = JobSpec.model_validate({"input": {"uri": source.as_uri()}, "output": {"include_fields": ["title", "year"]}})
    status = run_job_locally(local_ctx, spec)
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    assert status.counts.completed == 3 and manifest["columns"][-2:] == ["title", "year"]


def test_a_job_that_wrote_no_row_still_names_its_carried_columns(local_ctx):
    # Given records carrying fields that all fail in their shard (longer than the model's window)
    documents = [{**document, "text": "word " * 1000} for document in _documents()]
    spec = JobSpec.model_validate({"input": {"documents": documents}, "output": {"include_fields": ["title", "year"]},
                                   "long_documents": {"mode": "error"}})
    status = run_job_locally(local_ctx, spec)
    # Then the manifest's schema is what the parts would have held: the task's columns, then the fields
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    assert status.errors_by_code == {"document_too_long": 3}, status.errors_by_code
    assert manifest["parts"] == [] and manifest["columns"][-2:] == ["title", "year"]
    assert {c["name"]: c["type"] for c in manifest["output"]["schema"]}["year"] == "int64"


@pytest.mark.parametrize("body, field", [
    ({"output": {"include_fields": ["embedding"]}}, "output.include_fields"),
    ({"output": {"include_fields": ["title", "title"]}}, None),
])
def test_names_that_would_shadow_a_column_or_repeat_are_rejected(local_ctx, body, field):
    raw = {"input": {"documents": [{"id": "a", "text": "x"}]}, **body}
    if field is None:
        with pytest.raises(ValueError, match="names a field twice"):
            JobSpec.model_validate(raw)
        return
    with pytest.raises(JobRejected, match="shadow output columns") as caught:
        validate_spec(local_ctx, JobSpec.model_validate(raw))
    assert caught.value.field == field


def test_inline_fields_may_not_shadow_the_documents_own(local_ctx):
    spec = JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x", "fields": {"text": "y"}}]}})
    with pytest.raises(JobRejected, match="may not be named text") as caught:
        from poolq.jobs.steps.submit import submit_job

        submit_job(local_ctx, spec)
    assert caught.value.field == "input.documents.0.fields"


ARROW_TYPES = [pa.int32(), pa.timestamp("us", tz="UTC"), pa.list_(pa.string()), pa.decimal128(7, 2),
               pa.struct([("a", pa.int16())]), pa.timestamp("ns"), pa.dictionary(pa.int32(), pa.string())]


@pytest.mark.parametrize("data_type", ARROW_TYPES, ids=str)
def test_a_parquet_columns_arrow_type_is_a_field_type_exactly(data_type):
    field_type = arrow_field_type(data_type)
    assert is_arrow_type(field_type) and arrow_type(field_type).equals(data_type)
    assert IncludedColumns(["f"], {"f": field_type}).arrow_types() == {"f": data_type}


def test_an_arrow_column_takes_what_converts_to_its_type():
    int32, stamp = arrow_field_type(pa.int32()), arrow_field_type(pa.timestamp("s"))
    assert accepts(int32, 7) and accepts(int32, None) and not accepts(int32, 2**40) and not accepts(int32, "7")
    assert accepts(stamp, datetime.datetime(2024, 5, 1)) and not accepts(stamp, [1])
    nanos = pa.scalar(5, pa.timestamp("ns"))  # what a row holds for a value datetime cannot
    assert accepts(arrow_field_type(pa.timestamp("ns")), nanos) and not accepts(stamp, nanos)
    assert type_label(arrow_field_type(pa.list_(pa.string()))) == "list<string>" and type_label("integer") == "integer"


def test_a_json_column_refuses_values_json_has_no_type_for():
    assert not accepts("string", datetime.date(2024, 1, 1)) and json_type(datetime.date(2024, 1, 1)) == "date"
    assert column_value("json", [datetime.date(2024, 1, 2)]) == '["2024-01-02"]'


def test_only_fields_a_parquet_schema_types_exactly_skip_the_per_value_check():
    int32, int64 = arrow_field_type(pa.int32()), arrow_field_type(pa.int64())
    job = {"a": int32, "b": int32, "c": "integer", "d": int32}
    section = {"a": int32, "b": int64, "c": "integer"}  # d: a column this object lacks
    assert types_to_check(job, section) == {"b": int32, "c": "integer", "d": int32}


def test_arrow_values_python_cannot_hold_have_json_text_to_the_nanosecond():
    # str() and repr() of these call as_py(), which refuses nanoseconds without pandas
    nanos = [1_000_000_123, 1_000_000_124]
    at, took = pa.array(nanos, pa.time64("ns")), pa.array(nanos, pa.duration("ns"))
    listed = pa.array([[{"at": nanos[0], "n": None}]], pa.list_(pa.struct([("at", pa.timestamp("ns")), ("n", pa.int8())])))
    assert json_text({"at": at[0], "took": took[1]}) == '{"at":"time64[ns]:1000000123","took":"duration[ns]:1000000124"}'
    assert json_text(listed[0]) == '[{"at":"timestamp[ns]:1000000123","n":null}]'
    assert json_text([at[0]]) != json_text([at[1]])
