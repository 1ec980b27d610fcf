"""Property-based fuzzing of a whole local job (plan -> shards -> finalize, real MiniLM engine)
over a JSONL file that mixes valid records with hostile lines.

Invariants, against the independent oracle in jsonl_strategies: the job finishes in the state
its records call for (failed only when no record could be embedded, and never with a job-level
error); no exception escapes; counts.total is the number of non-blank lines and completed +
failed == total; every record id is in exactly one Parquet row; every other line, by line
number, is exactly one line of the error file with the oracle's code; no line is in both.
"""
from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonl_strategies import (
    BOM,
    Expected,
    dump_line,
    expect_job,
    fuzz_settings,
    garbage_line,
    gzipped,
    odd_text,
    valid_id_text,
    word_text,
)

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context, run_job_locally

# What the engine may say of a record the planner accepted whose text is not ordinary words.
ENGINE_CODES = {"empty_after_tokenization", "document_too_long"}


@pytest.fixture(scope="module")
def fuzz_ctx(tmp_path_factory, minilm_engine):
    ctx = local_context(tmp_path_factory.mktemp("fuzz-out"), Settings(shard_max_documents=4, shard_max_chars=20_000))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return ctx


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-in")


_counter = itertools.count()


@st.composite
def job_inputs(draw) -> tuple[bytes, set[int]]:
    """A JSONL file and the line numbers of the valid records written on purpose (ordinary words)."""
    ids = draw(st.lists(st.one_of(valid_id_text, st.integers(-10 ** 6, 10 ** 15)), max_size=10, unique_by=str))
    good = []
    for record_id in ids:
        record = {"id": record_id, "text": draw(word_text)}
        if draw(st.integers(0, 3)) == 0:
            record["meta"] = draw(st.sampled_from([{"a": [1, 2]}, None, "x", [[[]]]]))
        good.append(("good", dump_line(record, draw(st.booleans()), draw(st.booleans()))))
    garbage = [("garbage", line) for line in draw(st.lists(garbage_line, max_size=8))]
    # valid records whose text is odd (combining marks only, zero-width, controls, emoji...): the
    # engine may embed them or refuse them one by one, never lose them
    tricky = st.fixed_dictionaries({"id": valid_id_text, "text": odd_text.filter(str.strip)})
    garbage += [("garbage", dump_line(record, True, False)) for record in draw(st.lists(tricky, max_size=3))]
    if ids and draw(st.booleans()):  # the same id again, as a string or as a number
        again = draw(st.sampled_from(ids))
        again = int(again) if isinstance(again, str) and again.isdigit() and draw(st.booleans()) else str(again)
        garbage.append(("garbage", dump_line({"id": again, "text": "repeated"}, True, False)))
    pieces = draw(st.permutations(good + garbage))
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    constructed, number, lines = set(), 1, []
    for kind, line in pieces:
        if kind == "good":
            constructed.add(number)
        number += line.count(b"\n") + 1
        lines.append(line)
    content = newline.join(lines) + (newline if lines and draw(st.booleans()) else b"")
    if lines and draw(st.integers(0, 3)) == 0:
        content = BOM + content
    if content.startswith(b"\x1f\x8b"):
        content, constructed = b"\n" + content, {n + 1 for n in constructed}
    return content, constructed


def _error_entries(ctx, job_id: str) -> list[dict]:
    raw = ctx.store.get(JobHandle.bind(ctx, job_id).layout.errors)
    return [json.loads(line) for line in raw.split(b"\n") if line.strip()]


def _part_ids(ctx, manifest) -> list[str]:
    ids: list[str] = []
    for part in manifest.parts:
        ids += read_embeddings(ctx.store.get(part.key)).column("id").to_pylist()
    return ids


def check_job(ctx, content: bytes, constructed: set[int], path, stored: bytes | None = None) -> None:
    path.write_bytes(content if stored is None else stored)
    spec = JobSpec.model_validate({"input": {"uri": path.as_uri()}})
    status = run_job_locally(ctx, spec)  # raises nothing, whatever the input
    manifest = JobHandle.bind(ctx, status.id).ledger.manifest()
    assert manifest is not None, f"the job did not finish: {status}"
    # no failure of the job as a whole: an error, if any, only says that every record failed, and why
    per_record = status.error is None or (status.error.startswith("every record failed: ") and manifest.counts.completed == 0)
    assert per_record and manifest.error == status.error, f"the job failed as a whole: {status.error}"

    expected: list[Expected] = expect_job(content)
    records = {e.line: e for e in expected if e.is_record}
    line_errors = {e.line: e for e in expected if not e.is_record}
    errors = _error_entries(ctx, status.id)
    ids = _part_ids(ctx, manifest)

    # counts
    assert manifest.counts.total == status.counts.total == len(expected)
    assert manifest.counts.completed + manifest.counts.failed == manifest.counts.total
    assert (manifest.counts.completed, manifest.counts.failed) == (len(ids), len(errors))
    assert (status.counts.completed, status.counts.failed) == (len(ids), len(errors))

    # each line once, in the parts or the error file
    assert [id_ for id_, n in Counter(ids).items() if n > 1] == [], "an id is in the parts more than once"
    by_line = Counter(error["line"] for error in errors)
    assert [line for line, n in by_line.items() if n > 1] == [], "a line is in the error file more than once"
    errors_at = {error["line"]: error for error in errors}
    assert set(errors_at) <= set(records) | set(line_errors), "an error names a line that is blank or absent"
    for line, want in line_errors.items():
        got = errors_at.get(line)
        assert got is not None, f"line {line} ({want.code}) is neither embedded nor in the error file"
        assert got["code"] == want.code, (got, want)
        if want.id is not None and want.code != "invalid_id":
            assert got["id"] == want.id, (got, want)
    embedded = set(ids)
    for line, want in records.items():
        if line in errors_at:
            got = errors_at[line]
            assert line not in constructed, f"a valid record of ordinary words was refused: {got}"
            assert got["code"] in ENGINE_CODES and got["id"] == want.id, (got, want)
            assert want.id not in embedded, f"record {want.id!r} is both embedded and in the error file"
        else:
            assert want.id in embedded, f"record {want.id!r} (line {line}) was lost"
    assert embedded <= {want.id for want in records.values()}, "the parts hold an id no line gave"

    # the final state follows from the counts
    if not errors:
        assert status.status is JobState.SUCCEEDED
    elif ids:
        assert status.status is JobState.PARTIALLY_SUCCEEDED
    else:
        assert status.status is JobState.FAILED
    assert manifest.status is status.status


@fuzz_settings(15)
@given(data=job_inputs(), compress=st.booleans())
def test_a_job_over_hostile_jsonl_accounts_for_every_line(fuzz_ctx, input_dir, data, compress):
    content, constructed = data
    # a gzip-compressed file keeps its .jsonl name: it is read as gzip from its first bytes
    check_job(fuzz_ctx, content, constructed, input_dir / f"in-{next(_counter)}.jsonl", gzipped(content) if compress else None)
