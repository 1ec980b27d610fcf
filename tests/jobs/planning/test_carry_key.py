"""The carry key: a record's, from its input values, equals the key of the row a job wrote for it."""
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from poolq.jobs.inputs.included_fields import arrow_field_type, arrow_type, column_value
from poolq.jobs.planning.carry_key import columns_match, record_carry_key, stored_carry_keys

HASH = "ab" * 32
NAMES = ("title", "score", "count", "tags", "flag")
JOB_TYPES = {"title": "string", "score": "number", "count": "integer", "tags": "json", "flag": "boolean"}


def _stored_row(fields: dict, job_types: dict[str, str]) -> pa.Table:
    """The part a job of ``job_types`` writes for one record (its carried columns as the writer types them)."""
    columns = {"content_hash": pa.array([HASH])}
    for name, field_type in job_types.items():
        columns[name] = pa.array([column_value(field_type, fields.get(name))], type=arrow_type(field_type))
    return pa.table(columns)


@pytest.mark.parametrize("fields", [
    {"title": "a title", "score": 0.5, "count": 3, "tags": {"k": [1, "x"]}, "flag": True},
    {"title": None, "score": 2.0, "count": 0, "tags": [], "flag": False},
    {},  # every field missing: nulls
], ids=["values", "edges", "missing"])
def test_a_records_key_is_the_key_of_the_row_written_for_it(fields):
    row = _stored_row(fields, JOB_TYPES)
    assert columns_match(row.schema, NAMES, JOB_TYPES)
    assert stored_carry_keys(row, NAMES, JOB_TYPES) == [record_carry_key(HASH, NAMES, {}, fields)]


def test_parquet_columns_key_by_their_arrow_type():
    # Given fields a Parquet schema types exactly (a timestamp, an int32, a list of strings)
    types = {"at": arrow_field_type(pa.timestamp("us", tz="UTC")), "n": arrow_field_type(pa.int32()),
             "labels": arrow_field_type(pa.list_(pa.string()))}
    fields = {"at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "n": 7, "labels": ["a", "b"]}
    names = tuple(types)
    row = _stored_row(fields, types)
    # Then the section's types key the record as the stored row is keyed
    assert stored_carry_keys(row, names, types) == [record_carry_key(HASH, names, types, fields)]


@pytest.mark.parametrize("change", [
    {"title": "another title"}, {"score": 0.75}, {"tags": {"k": [1, "y"]}}, {"flag": False}, {"count": None},
    {"tags": '{"k":[1,"x"]}'},  # the same text as a string: no JSON value, a string the json column refuses
    {"score": 1},  # an integer: a number column would hold 1.0 (keyed apart: embedded again, never wrong)
], ids=["string", "number", "json", "boolean", "null", "json-as-string", "integer-in-number"])
def test_a_changed_or_retyped_value_changes_the_key(change):
    fields = {"title": "a title", "score": 0.5 if "score" not in change else 1.0, "count": 3, "tags": {"k": [1, "x"]},
              "flag": True}
    row = _stored_row(fields, JOB_TYPES)
    assert stored_carry_keys(row, NAMES, JOB_TYPES) != [record_carry_key(HASH, NAMES, {}, {**fields, **change})]


def test_without_carried_fields_the_key_is_the_content_hash():
    row = pa.table({"content_hash": [HASH]})
    assert stored_carry_keys(row, (), {}) == [record_carry_key(HASH, (), {}, {"title": "ignored"})] == [HASH[:16]]


def test_a_column_of_another_type_or_a_missing_one_does_not_match():
    schema = pa.schema([("title", pa.string()), ("score", pa.int64())])
    assert not columns_match(schema, ("title", "score"), {"title": "string", "score": "number"})
    assert not columns_match(schema, ("title", "flag"), {"title": "string", "flag": "boolean"})
    assert columns_match(schema, ("title",), {"title": "string"})
