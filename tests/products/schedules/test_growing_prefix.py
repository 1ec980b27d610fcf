"""A schedule over a prefix that grows between runs (a tenant's uploads): each run reads the prefix
as one corpus, a newer object's record superseding an older one's with the same id; with the
previous run as baseline only what is new or changed is embedded. Run in process."""
import json
import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from poolq.jobs.inputs.content_hash import content_hash
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_state import JobState
from poolq.products.schedules.schedule import ScheduleRequest
from poolq.products.schedules.schedule_admin import create_schedule
from poolq.products.schedules.schedule_runner import run_schedule
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
UPLOAD_1 = [{"id": "a", "text": "the first document"}, {"id": "b", "text": "the second document"},
            {"id": "c", "text": "the third document"}]
# Upload 2 re-sends the corpus as it is now: b edited, c unchanged, d new (a not re-sent: it stays)
UPLOAD_2 = [{"id": "b", "text": "the second document, edited"}, {"id": "c", "text": "the third document"},
            {"id": "d", "text": "a fourth document"}]


def _upload(folder, name: str, docs: list[dict], modified: float) -> None:
    path = folder / name
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    os.utime(path, (modified, modified))


def _finished(ctx, run) -> tuple[dict, pa.Table, list[dict]]:
    """The run's manifest, its output rows by id, and its error lines."""
    layout = JobHandle.bind(ctx, run.job_id).layout
    manifest = json.loads(ctx.store.get(layout.manifest))
    table = pa.concat_tables([read_embeddings(ctx.store.get(part["key"])) for part in manifest["parts"]]).sort_by("id")
    errors = [json.loads(line) for line in ctx.store.get(layout.errors).splitlines()] if ctx.store.exists(layout.errors) else []
    return manifest, table, errors


def _embedded(manifest: dict) -> int:
    return manifest["counts"]["completed"] - manifest["counts"]["carried"]


def test_a_schedule_over_a_growing_prefix_embeds_only_what_is_new_and_outputs_the_whole_corpus(tmp_path, minilm_engine):
    # Given a schedule over an uploads prefix holding one upload
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    _upload(uploads, "f3a9.jsonl", UPLOAD_1, modified=1_000_000)
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    request = ScheduleRequest.model_validate({"cron": "* * * * *", "input": {"uri": uploads.as_uri() + "/"}})
    schedule = create_schedule(ctx, request)
    # When it runs, then a second upload lands (its key sorts first: upload keys are random), and it runs again
    first = run_schedule(ctx, schedule.id, now=T0)
    _upload(uploads, "0b17.jsonl", UPLOAD_2, modified=2_000_000)
    second = run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=1))
    # Then run 1 embedded all of upload 1
    manifest1, table1, errors1 = _finished(ctx, first)
    assert manifest1["status"] == JobState.SUCCEEDED.value and errors1 == []
    assert _embedded(manifest1) == 3 and table1.column("id").to_pylist() == ["a", "b", "c"]
    # And run 2 failed nothing: upload 1's b and c are superseded by upload 2's, not duplicates
    manifest2, table2, errors2 = _finished(ctx, second)
    assert second.incremental_from == first.job_id
    assert manifest2["status"] == JobState.SUCCEEDED.value, manifest2
    assert errors2 == [] and manifest2["counts"]["failed"] == 0
    assert JobHandle.bind(ctx, second.job_id).ledger.plan().superseded == 2
    assert manifest2["counts"]["superseded"] == 2 and manifest1["counts"]["superseded"] == 0  # the public record says so
    # embedding only upload 2's edited and new documents (a and the unchanged c are carried)
    assert manifest2["counts"]["carried"] == 2 and _embedded(manifest2) == 2
    assert manifest2["counts"]["total"] == manifest2["counts"]["completed"] == 4
    # and its output is the whole corpus, each id's newest text
    newest = {doc["id"]: doc["text"] for doc in UPLOAD_1 + UPLOAD_2}
    assert table2.column("id").to_pylist() == ["a", "b", "c", "d"]
    assert table2.column("content_hash").to_pylist() == [content_hash(newest[i]) for i in "abcd"]
    # When nothing new lands, the next run embeds nothing and still outputs the whole corpus
    third = run_schedule(ctx, schedule.id, now=T0 + timedelta(minutes=2))
    manifest3, table3, errors3 = _finished(ctx, third)
    assert errors3 == [] and _embedded(manifest3) == 0 and manifest3["counts"]["carried"] == 4
    assert table3.column("id").to_pylist() == ["a", "b", "c", "d"]


def test_a_repeated_id_within_one_upload_is_still_a_duplicate(tmp_path, minilm_engine):
    # Given a prefix whose newer upload repeats an id within itself (and repeats an older upload's id)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    _upload(uploads, "b.jsonl", [{"id": "x", "text": "old x"}, {"id": "y", "text": "old y"}, {"id": "y", "text": "y again"}],
            modified=1_000_000)
    _upload(uploads, "a.jsonl", [{"id": "x", "text": "new x"}, {"id": "x", "text": "x twice"}], modified=2_000_000)
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    request = ScheduleRequest.model_validate({"cron": "* * * * *", "input": {"uri": uploads.as_uri() + "/"}})
    run = run_schedule(ctx, create_schedule(ctx, request).id, now=T0)
    manifest, table, errors = _finished(ctx, run)
    # Then each object's own repeat fails as today (in input order: oldest object first), naming
    # its first line in that object; the older object's x is superseded, not failed
    assert [(e["code"], e["id"], e["line"], e["source"].rsplit("/", 1)[-1]) for e in errors] == [
        ("duplicate_id", "y", 3, "b.jsonl"), ("duplicate_id", "x", 2, "a.jsonl")]
    assert errors[0]["message"].endswith("this id appeared before, at line 2")
    assert errors[1]["message"].endswith("this id appeared before, at line 1")
    assert JobHandle.bind(ctx, run.job_id).ledger.plan().superseded == manifest["counts"]["superseded"] == 1
    assert dict(zip(table.column("id").to_pylist(), table.column("content_hash").to_pylist())) == {
        "x": content_hash("new x"), "y": content_hash("old y")}
    assert manifest["counts"]["total"] == 4 and manifest["counts"]["failed"] == 2
