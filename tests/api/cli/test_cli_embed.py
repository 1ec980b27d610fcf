"""`poolq embed`: the embedded default, no services; the results under OUT/<job_id>/ as `poolq results`
writes them (manifest.json, parts/*.parquet, errors.jsonl); a summary, or the status with --json."""
import json
from pathlib import Path
from urllib.parse import urlparse

from click.testing import CliRunner

from poolq.api.cli.main import main
from poolq.storage import read_embeddings


def test_embed_writes_the_job_layout_and_reports_bad_lines(tmp_path, sample_documents):
    # Given a JSONL file with custom field names and one broken line
    rows = [{"doc": d["id"], "body": d["text"]} for d in sample_documents[:3]]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n", encoding="utf-8")
    # When poolq embed runs with truncation
    result = CliRunner().invoke(
        main,
        ["embed", str(source), "--out", str(tmp_path / "out"), "--id-field", "doc", "--text-field", "body",
         "--long-documents", '{"mode": "truncate"}', "--json"],
    )
    # Then it reports a partial success and the results are in OUT/<job_id>/, nothing else under OUT
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["status"] == "partially_succeeded" and status["counts"] == {
        "total": 4, "completed": 3, "failed": 1, "not_processed": 0}
    job_dir = tmp_path / "out" / status["id"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == [status["id"]]
    assert status["result"]["manifest_uri"] == (job_dir / "manifest.json").as_uri()
    manifest = json.loads((job_dir / "manifest.json").read_text())
    (part,) = manifest["parts"]  # part files are named per attempt; the manifest lists the committed ones
    assert part["path"].startswith("parts/") and sorted(p.name for p in job_dir.iterdir()) == [
        "errors.jsonl", "manifest.json", "parts"]
    table = read_embeddings((job_dir / part["path"]).read_bytes())
    assert table.column("id").to_pylist() == [r["doc"] for r in rows] and manifest["counts"]["completed"] == 3
    assert manifest["errors"]["path"] == "errors.jsonl"
    (error,) = [json.loads(line) for line in (job_dir / "errors.jsonl").read_text().splitlines()]
    assert (error["line"], error["code"]) == (4, "invalid_json")


def test_embed_prints_a_summary_naming_its_files(tmp_path, sample_documents):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": d["id"], "text": d["text"][:200]}) + "\n" for d in sample_documents[:2]))
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary, *files = result.output.splitlines()
    job_id = summary.split()[1]
    assert summary.startswith(f"job {job_id} succeeded: 2/2 documents, 0 failed, ") and " tokens in " in summary
    job_dir = tmp_path / "out" / job_id
    (part,) = (job_dir / "parts").iterdir()
    assert files == [f"  part      {part}  (2 rows)", f"  errors    {job_dir / 'errors.jsonl'}  (0 records)",
                     f"  manifest  {job_dir / 'manifest.json'}"]


def test_embed_rejects_bad_options_with_a_clear_message(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "text": "x"}\n')
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path), "--long-documents", '{"mode": "squash"}'])
    assert result.exit_code == 2 and "long_documents.mode" in result.output
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path), "--model", "nope"])
    assert result.exit_code == 2 and "unknown model 'nope'" in result.output


def test_embed_takes_the_job_bodys_long_document_options(tmp_path, long_documents):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "albedo", "text": long_documents[0]["text"]}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path / "out"), "--json",
                                       "--long-documents", '{"mode": "late_chunks", "chunk_tokens": 64}'])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    manifest_path = Path(urlparse(status["result"]["manifest_uri"]).path)
    manifest = json.loads(manifest_path.read_text())
    table = read_embeddings((manifest_path.parent / manifest["parts"][0]["path"]).read_bytes())
    rows = table.to_pylist()
    assert len(rows) == -(-(rows[0]["num_tokens"] - 2) // 64)  # one row per 64 content tokens
    assert rows[-1]["token_end"] == rows[0]["num_tokens"] and rows[0]["token_start"] == 0


def test_embed_runs_other_tasks_with_their_output_options(tmp_path, sample_documents):
    # Given three real documents, When poolq embed runs SPLADE-tiny with a top-k of 16
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": d["id"], "text": d["text"]}) + "\n" for d in sample_documents[:3]))
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path / "out"), "--model", "splade-tiny",
                                       "--task", "sparse_embed", "--output", '{"sparse_top_k": 16}',
                                       "--long-documents", '{"mode": "truncate"}', "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    manifest = json.loads((tmp_path / "out" / status["id"] / "manifest.json").read_text())
    table = read_embeddings((tmp_path / "out" / status["id"] / manifest["parts"][0]["path"]).read_bytes())
    # Then the rows are sparse vectors of at most 16 terms
    assert status["task"] == "sparse_embed" and table.num_rows == 3
    assert all(0 < len(indices) <= 16 for indices in table.column("sparse_indices").to_pylist())


def test_embed_names_the_option_a_task_does_not_take(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "text": "x"}\n')
    result = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path), "--output", '{"activation": false}'])
    assert result.exit_code == 2 and "output.activation does not apply to task 'embed'" in result.output
    bad = CliRunner().invoke(main, ["embed", str(source), "--out", str(tmp_path), "--output", "[1]"])
    assert bad.exit_code == 2 and "--output" in bad.output and "JSON object" in bad.output


def test_help_lists_every_task_and_long_document_mode_from_the_registries():
    from poolq.engine import LongDocumentMode
    from poolq.jobs import JOB_TASKS

    for command in ("submit", "embed"):
        shown = " ".join(CliRunner().invoke(main, [command, "--help"], terminal_width=200).output.split())
        for name, task in JOB_TASKS.items():
            assert task.summary and f"{name}: {task.summary}" in shown, (command, name)
        assert f"modes: {', '.join(mode.value for mode in LongDocumentMode)}" in shown, command
    assert len(JOB_TASKS) == 6
