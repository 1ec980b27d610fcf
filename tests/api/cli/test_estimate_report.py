"""The estimate's ``tokens (usage)`` line is the quantity the finished job's ``usage.tokens`` reports:
the tokens the model runs (prompt and special tokens included, each repeated text once), not the
tokens of every document. On an input the sample holds whole, the two are equal to the token."""
import json
import re

from rich.console import Console

from poolq.api.cli.estimate_report import print_estimate
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.estimator import estimate_job
from poolq.worker.local_runner import run_job_locally


def _printed(estimate) -> dict[str, str]:
    console = Console(record=True, width=200)
    print_estimate(estimate, console)
    rows = (re.split(r"\s*│\s*", line.strip("│ ")) for line in console.export_text().splitlines() if "│" in line)
    return {row[0]: row[1] for row in rows if len(row) == 2}


def test_tokens_usage_is_the_finished_jobs_usage_tokens(tmp_path, local_ctx, sample_documents):
    # Given documents of mixed lengths (some cut into chunk windows), the longest ones repeated
    # (repeats far longer than the average document), and a prompt before every text
    texts = [" ".join(d["text"].split()[:8 * (index + 1)]) for index, d in enumerate(sample_documents[:12])]
    documents = [{"id": f"d{i}", "text": text} for i, text in enumerate(texts)]
    documents += [{"id": f"again-{i}", "text": texts[-1 - i % 2]} for i in range(6)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    spec = JobSpec.model_validate({"input": {"uri": path.as_uri()}, "prompt": "passage: ",
                                   "long_documents": {"mode": "naive_chunks", "chunk_tokens": 48}})
    # When the job is estimated, then run in process (shards of 4: repeats across shards)
    estimate = estimate_job(local_ctx, spec, "local")
    status = run_job_locally(local_ctx, spec)
    # Then the printed usage line, and the estimate's computed tokens, are the job's usage.tokens exactly
    assert status.status.value == "succeeded" and status.reuse.reused_documents == 6
    printed = _printed(estimate)
    assert printed["tokens (usage)"] == f"{status.usage.tokens:,}"
    assert estimate.computed_tokens == status.usage.tokens
    # and the line counting every repeat is usage plus what the repeats would have cost
    assert printed["tokens, every repeat counted"] == f"{status.usage.tokens + status.reuse.reused_tokens:,}"
    assert estimate.duplicates.tokens == status.reuse.reused_tokens
