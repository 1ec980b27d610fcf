"""The ledger's promise across planning's features: every input record ends in exactly one output
part or in the job's error file, and the manifest's counts balance (total = completed + failed +
not_processed; superseded records outside total; carried documents in completed and in a carried
part). Each test checks it from the outside: the manifest, the parts' ids, the error file's lines."""
import json
import os
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from poolq.jobs.inputs.content_hash import content_hash
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.planning import incremental
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context, run_job_locally


def _write(path, docs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path.as_uri()


def _run(ctx, spec: dict):
    return run_job_locally(ctx, JobSpec.model_validate(spec))


def _outcome(ctx, job_id):
    """The manifest, each document id's count over the parts (a chunked one's rows once), the error lines."""
    layout = JobHandle.bind(ctx, job_id).layout
    manifest = json.loads(ctx.store.get(layout.manifest))
    ids: Counter[str] = Counter()
    for part in manifest["parts"]:
        table = read_embeddings(ctx.store.get(part["key"]), columns=["id"])
        ids.update(pa.compute.unique(table.column("id")).to_pylist())
    errors = [json.loads(line) for line in ctx.store.get(layout.errors).splitlines() if line.strip()]
    return manifest, ids, errors


def _assert_ledger(ctx, job_id, input_ids: list[str]):
    """Every id of the input (superseded ones aside: pass what is left) is in one part or one error line, once."""
    manifest, ids, errors = _outcome(ctx, job_id)
    counts = manifest["counts"]
    failed = [error["id"] for error in errors if error["code"] != "not_processed"]
    placed = Counter(ids) + Counter(failed)
    assert sorted(placed.elements()) == sorted(input_ids), (dict(ids), errors)
    assert counts["total"] == counts["completed"] + counts["failed"] + counts["not_processed"], counts
    assert (counts["completed"], counts["failed"]) == (sum(ids.values()), len(failed)), counts


def test_a_carried_document_whose_field_has_another_type_now_is_in_one_place(tmp_path, local_ctx):
    # Given a run carrying field "meta" (a string in its input)
    spec = {"output": {"include_fields": ["meta"]}}
    first = _run(local_ctx, {**spec, "input": {"uri": _write(tmp_path / "v1.jsonl", [
        {"id": "a", "text": "the first document", "meta": "x"}])}})
    # When a new input types "meta" as an integer first, and re-sends "a" unchanged (text and field)
    docs = [{"id": "b", "text": "the second document", "meta": 1}, {"id": "a", "text": "the first document", "meta": "x"}]
    second = _run(local_ctx, {**spec, "input": {"uri": _write(tmp_path / "v2.jsonl", docs)}, "incremental_from": first.id})
    # Then "a" is in one place only, where a fresh run puts it: its field_type_mismatch error (the
    # baseline's column is a string, the job's an integer: nothing of it is carried)
    _assert_ledger(local_ctx, second.id, ["a", "b"])
    manifest, ids, errors = _outcome(local_ctx, second.id)
    assert [(e["id"], e["code"]) for e in errors] == [("a", "field_type_mismatch")] and manifest["counts"]["carried"] == 0


def test_an_inline_job_whose_planning_fails_counts_its_documents_in_one_place(tmp_path, local_ctx, monkeypatch):
    # Given a finished run, and an incremental run of the same inline documents whose baseline part
    # vanishes after it was read, before its rows were copied (planning fails: BaselineChanged)
    docs = [{"id": f"d{i}", "text": f"document number {i}"} for i in range(3)]
    first = _run(local_ctx, {"input": {"documents": docs}})
    spill = incremental.spill_baseline_part

    def spill_then_vanish(store, key, *args):
        spill(store, key, *args)
        store.delete(key)

    monkeypatch.setattr(incremental, "spill_baseline_part", spill_then_vanish)
    failed = _run(local_ctx, {"input": {"documents": docs}, "incremental_from": first.id})
    # Then the job failed, saying why, and its counts still balance: its 3 records are not processed
    assert failed.status is JobState.FAILED and "BaselineChanged" in failed.error
    manifest, ids, errors = _outcome(local_ctx, failed.id)
    counts = manifest["counts"]
    assert not ids and not errors and counts["total"] == 3
    assert counts["total"] == counts["completed"] + counts["failed"] + counts["not_processed"], counts


PAD = "p" * 5000  # a field nothing reads: input bytes (many sections and id partitions) at no embedding cost
LONG = " ".join(["Rivers carry sediment to the sea, and the deltas they build move with every flood."] * 12)


def _upload(folder, name, docs, modified):
    path = folder / name
    if name.endswith(".parquet"):
        pq.write_table(pa.Table.from_pylist([{**d, "pad": PAD} for d in docs]), path, row_group_size=2)
    else:
        path.write_text("".join(json.dumps({**d, "pad": PAD}) + "\n" for d in docs))
    os.utime(path, (modified, modified))


def _expected(objects):
    """The reference: each id's record in the latest object holding it (its first there); a repeat
    within one object and a record without text are errors; an earlier object's record is superseded."""
    kept, errors, superseded = {}, [], 0
    for docs in objects:
        here = set()
        for doc in docs:
            if doc.get("text") is None or doc["id"] in here:
                errors.append(doc["id"])
                continue
            here.add(doc["id"])
            superseded += doc["id"] in kept
            kept[doc["id"]] = doc["text"]
    return kept, errors, superseded


def test_supersede_incremental_tenant_reuse_duplicates_parquet_and_chunks_in_small_sections(tmp_path, minilm_engine):
    # Given a tenant's growing prefix (JSONL and Parquet, oldest first), planned in ~1 KiB sections
    # and several id partitions, with repeats within objects, superseding ids, texts repeated
    # under other ids, a long document cut into chunks, and tenant reuse
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, plan_section_bytes=1 << 10,
                                                   plan_partition_bytes=1 << 16))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    folder = tmp_path / "uploads"
    folder.mkdir()
    o1 = [{"id": "a", "text": "the first document"}, {"id": "b", "text": "the second document"},
          {"id": "c", "text": "the third document"}, {"id": "d", "text": "the fourth document"},
          {"id": "d", "text": "the fourth document, again"}, {"id": "e", "text": LONG}]
    o2 = [{"id": "f", "text": "the sixth document"}, {"id": "c", "text": "the third document, edited"},
          {"id": "g", "text": "the seventh document"}, {"id": "e", "text": LONG}, {"id": "x", "text": None}]
    o3 = [{"id": "b", "text": "the second document"}, {"id": "g", "text": "the seventh document, edited"},
          {"id": "h", "text": "the first document"}, {"id": "h", "text": "a repeat of h"},
          {"id": "c", "text": "the third document, edited"}, {"id": "i", "text": "the sixth document"},
          {"id": "y"}, {"id": "e", "text": LONG + " One more sentence."}, {"id": "a", "text": "the first document"}]
    _upload(folder, "k2.jsonl", o1, 1_000_000)
    _upload(folder, "k1.parquet", o2, 2_000_000)
    options = {"input": {"uri": folder.as_uri() + "/", "supersede": True}, "reuse": "tenant",
               "long_documents": {"mode": "naive_chunks", "chunk_tokens": 16}}
    first = _run(ctx, options)
    _assert_run(ctx, first, [o1, o2], baseline={})
    # When a third object lands (its key sorts first) and the prefix runs again, incrementally
    _upload(folder, "k0.jsonl", o3, 3_000_000)
    second = _run(ctx, {**options, "incremental_from": first.id})
    # Then every record is in one place, the counts balance, and the carried are exactly the unchanged
    _assert_run(ctx, second, [o1, o2, o3], baseline=_expected([o1, o2])[0])


def _assert_run(ctx, status, objects, baseline):
    kept, errors, superseded = _expected(objects)
    manifest, ids, error_lines = _outcome(ctx, status.id)
    assert Counter(ids) == Counter(kept.keys()), (dict(ids), error_lines)
    assert Counter(error["id"] for error in error_lines) == Counter(errors), error_lines
    carried = sum(baseline.get(record_id) == text for record_id, text in kept.items())
    assert manifest["counts"] | {"rows": 0} == {"total": len(kept) + len(errors), "completed": len(kept),
                                                "failed": len(errors), "not_processed": 0, "carried": carried,
                                                "rows": 0, "superseded": superseded}
    hashes: dict[str, str] = {}
    for part in manifest["parts"]:
        table = read_embeddings(ctx.store.get(part["key"]), columns=["id", "content_hash"])
        hashes.update(zip(table.column("id").to_pylist(), table.column("content_hash").to_pylist()))
    assert hashes == {record_id: content_hash(text) for record_id, text in kept.items()}


def test_a_query_re_sent_by_a_later_object_is_ranked_from_its_latest_pairs(tmp_path, local_ctx):
    # Given a superseding prefix of query "alpha"'s pairs, re-sent whole (same pair ids) by a newer object
    folder = tmp_path / "pairs"
    folder.mkdir()
    pairs = [{"id": f"alpha-{d}", "query": "what do foxes eat", "query_id": "alpha", "text": text}
             for d, text in enumerate(["Foxes eat rodents and berries.", "The market fell on Monday."])]
    (folder / "old.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in pairs))
    (folder / "new.jsonl").write_text("".join(json.dumps({**pair, "text": pair["text"] + " Revised."}) + "\n"
                                              for pair in pairs))
    os.utime(folder / "old.jsonl", (1_000_000, 1_000_000))
    os.utime(folder / "new.jsonl", (2_000_000, 2_000_000))
    status = _run(local_ctx, {"task": "score", "score_mode": "cosine",
                              "input": {"uri": folder.as_uri() + "/", "supersede": True}})
    # Then the newer object's pairs are the documents, ranked together; the older ones are superseded.
    # (The split of runs sharing a query id must not count the superseded run as the query's first.)
    manifest, ids, errors = _outcome(local_ctx, status.id)
    assert (dict(ids), errors) == ({"alpha-0": 1, "alpha-1": 1}, [])
    assert manifest["counts"]["superseded"] == 2 and manifest["counts"]["completed"] == 2
