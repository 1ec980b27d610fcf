"""The estimate against the real job, on real processes (`poolq dev up`: Redis, SeaweedFS, the
API, a Celery worker): a 5,000-document mixed-length chunk job's tokens and rows within 5 % of
what the finished job's manifest says, from a sample a small fraction of the input; the data
report on the results route; the worker's measured throughput turning into a time; and the CLI's
``submit --estimate`` and ``results --report``.

A tiny random-weight BERT (MiniLM's tokenizer, a 128-token window) keeps the 5,000 documents to
seconds of model work: what is tested is the counting, which a model's weights do not change.
The sample is 120 documents per length stratum (7 strata here, ~840 documents): under a fifth of
the 5,000, as the default 256 per stratum (1,780 documents) is of 10,000 (docs/estimate.md)."""
import json
import random

import pytest
from click.testing import CliRunner
from support.dev_stack import dev_stack
from support.random_models import save_random_model, tiny_bert_config

from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient, PoolqError
from poolq.api.server.schemas import JobResults

pytestmark = pytest.mark.integration
DOCUMENTS = 5_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from transformers import BertModel

    tiny = tmp_path_factory.mktemp("tiny")
    save_random_model(tiny, BertModel, tiny_bert_config(), seed=1)
    env = {"POOLQ_MODELS": json.dumps({"tiny": str(tiny)}), "POOLQ_SHARD_MAX_DOCUMENTS": "1250",
           "POOLQ_ESTIMATE_SAMPLE_PER_STRATUM": "120"}
    with dev_stack(tmp_path_factory.mktemp("stack"), env=env) as info:
        yield info


def _mixed_lines(sample_documents) -> bytes:
    """Real text at mixed lengths (2 to ~180 words, log-uniform: most short, a tail several
    windows long), a tenth of them repeats of earlier ones."""
    words = " ".join(d["text"] for d in sample_documents).split()
    rng = random.Random(11)
    texts: list[str] = []
    for index in range(DOCUMENTS):
        if index % 10 == 9:
            texts.append(texts[rng.randrange(len(texts))])
            continue
        length = int(2 ** rng.uniform(1, 7.5))
        start = rng.randrange(len(words) - length)
        texts.append(" ".join(words[start:start + length]))
    return "".join(json.dumps({"id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(texts)).encode()


def test_an_input_that_cannot_be_read_is_a_422_at_input_uri(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        uri = client.upload(b'{"id": "a", "text": "x"}\n').rsplit("/", 1)[0] + "/missing.jsonl"
        with pytest.raises(PoolqError) as refused:
            client.estimate({"model": "tiny", "input": {"uri": uri}})
    assert refused.value.status_code == 422
    (error,) = refused.value.detail
    assert error["loc"] == ["body", "input", "uri"] and "cannot be read" in error["msg"]


def test_the_estimate_of_a_5k_document_job_is_within_5_percent_of_the_job(stack, sample_documents, tmp_path):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        uri = client.upload(_mixed_lines(sample_documents))
        spec = {"model": "tiny", "input": {"uri": uri}, "long_documents": {"mode": "naive_chunks", "chunk_tokens": 24}}
        estimate = client.estimate(spec)
        # No worker has measured this model yet: no time is made up
        assert estimate.time.workers_alive >= 1 and estimate.time.wall_seconds is None, estimate.time
        job = client.submit(spec)
        final = client.wait(job["id"], poll_interval=0.5, timeout=900)
        results = JobResults.model_validate(client.results(job["id"]))
        again = client.estimate(spec)
    assert final["status"] == "succeeded", final
    assert estimate.documents == DOCUMENTS and estimate.sample.documents < DOCUMENTS / 5  # extrapolated
    computed, rows = results.usage.tokens, results.counts.rows  # a repeated text is computed once
    tokens = computed + results.manifest.get("reuse", {}).get("reused_tokens", 0)
    assert abs(estimate.tokens - tokens) / tokens < 0.05, (estimate.tokens, tokens)
    assert abs(estimate.computed_tokens - computed) / computed < 0.05, (estimate.computed_tokens, computed)
    assert abs(estimate.rows - rows) / rows < 0.05, (estimate.rows, rows)
    assert rows > 1.5 * DOCUMENTS  # the chunk mode made many rows: rows are not documents
    # The data report counts the job exactly
    report = results.report
    assert report is not None and report.documents == DOCUMENTS and report.chunk_tokens.total == rows
    assert report.document_tokens.total == DOCUMENTS and report.chunked > 0
    assert report.duplicate_rate == pytest.approx(estimate.duplicates.rate, abs=0.002)
    # The worker measured its throughput on the job's shards: the next estimate has a time
    assert again.time.measured and again.time.wall_seconds and again.time.wall_seconds > 0, again.time
    assert again.time.worker_seconds == pytest.approx(again.computed_tokens / again.time.measured[0].tokens_per_s, rel=0.01)
    # The CLI: the same estimate for a local file, and the report readably
    env = {"POOLQ_API_URL": stack["api_url"], "POOLQ_API_KEY": stack["api_key"]}
    source = tmp_path / "in.jsonl"
    source.write_bytes(_mixed_lines(sample_documents))
    cli = CliRunner().invoke(main, ["submit", str(source), "--model", "tiny", "--long-documents",
                                    json.dumps(spec["long_documents"]), "--estimate", "--json"], env=env)
    assert cli.exit_code == 0, cli.output
    printed = json.loads(cli.stdout)
    assert (printed["documents"], printed["tokens"], printed["rows"]) == (estimate.documents, estimate.tokens, estimate.rows)
    shown = CliRunner().invoke(main, ["results", job["id"], "--report"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "document length (tokens)" in shown.stdout and "chunk length (tokens)" in shown.stdout
    assert f"{DOCUMENTS:,}" in shown.stdout
