"""The client verbs of the CLI (submit, status, wait, results, cancel, jobs, schedules): exit codes
and messages. The verbs run in-process (CliRunner) against a real `poolq dev up` stack over HTTP;
the terminal test runs `python -m poolq.api` in a pseudo-terminal and checks the progress bar it drew."""
import json
import os
import re
import select
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.dev_stack import dev_stack
from support.dev_stack import poolq as _poolq
from support.job_statuses import job_status
from support.key_signing import TEST_KEY_SIGNING_SECRET

from poolq.api.cli.main import main
from poolq.api.cli.output import ExitCode, error_message, exit_code_for
from poolq.api.cli.progress import PlainJobProgress, Throughput, format_eta
from poolq.api.client.poolq_client import PoolqClient, PoolqError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
JOB_ID = re.compile(r"\b[0-9a-f]{32}\b")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("cli-stack"), env={"POOLQ_SHARD_MAX_DOCUMENTS": "8"}) as info:
        yield info


@pytest.fixture
def env(stack):
    return {"POOLQ_API_URL": stack["api_url"], "POOLQ_API_KEY": stack["api_key"]}


def cli(*args: str, env: dict):
    return CliRunner().invoke(main, list(args), env=env)


def _jsonl(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _docs(sample_documents, n):
    return [{"id": d["id"], "text": d["text"][:400]} for d in sample_documents[:n]]


# With a real stack -----------------------------------------------------------------------------


@pytest.mark.integration
def test_submit_wait_in_a_terminal_then_results(stack, env, sample_documents, tmp_path):
    # Given a local JSONL file, submitted and waited for by the CLI in a pseudo-terminal
    docs = _docs(sample_documents, 16)
    source = _jsonl(tmp_path / "corpus.jsonl", docs)
    code, screen = _run_in_terminal(["submit", str(source), "--wait", "--poll-interval", "0.2",
                                     "--long-documents", '{"mode": "truncate"}'], env)
    # Then it exits 0 having drawn a rich progress bar with documents, tokens/s and an ETA
    assert code == 0, screen
    assert "━" in screen and screen.count("documents") >= 2, screen
    assert f"{len(docs)}/{len(docs)} documents" in screen and "tokens/s" in screen and "ETA" in screen
    assert re.search(r"[\d,]+ tokens/s", screen) and re.search(r"ETA \d+:\d\d:\d\d", screen), screen
    assert "uploaded" in screen and "succeeded" in screen and "Traceback" not in screen
    assert env["POOLQ_API_KEY"] not in screen
    job_id = re.search(r"^([0-9a-f]{32})\r?$", screen, re.MULTILINE).group(1)  # the line stdout printed
    # And `poolq results ID --out DIR` downloads Parquet parts holding every id exactly once
    out = tmp_path / "results"
    result = _poolq("results", job_id, "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    parts = sorted((out / "parts").glob("*.parquet"))
    ids = [i for part in parts for i in pq.read_table(part).column("id").to_pylist()]
    assert sorted(ids) == sorted(d["id"] for d in docs) and len(parts) == -(-len(docs) // 8)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / "errors.jsonl").read_text() == "" and manifest["job_id"] == job_id
    # the stored manifest (timings, engines, options; no expiring URLs), its files named relative to DIR
    assert {"timings", "engines", "model", "options"} <= set(manifest) and "url" not in json.dumps(manifest)
    assert sorted(out / part["path"] for part in manifest["parts"]) == parts and manifest["errors"]["path"] == "errors.jsonl"
    assert f"{len(ids)} rows in {len(parts)} parts" in result.stdout and str(out / "manifest.json") in result.stdout


@pytest.mark.integration
def test_partial_success_plain_progress_status_results_and_jobs(env, sample_documents, tmp_path):
    # Given a file with one record that cannot be embedded (empty text)
    docs = _docs(sample_documents, 5) + [{"id": "blank", "text": ""}]
    source = _jsonl(tmp_path / "in.jsonl", docs)
    submitted = cli("submit", str(source), "--wait", "--poll-interval", "0.2", env=env)
    # Then: exit 6, the id first on stdout, plain progress lines (not a TTY) on stderr
    assert submitted.exit_code == ExitCode.PARTIAL, submitted.output
    job_id = submitted.stdout.splitlines()[0]
    assert JOB_ID.fullmatch(job_id) and f"job {job_id} partially_succeeded: 5/6 documents, 1 failed" in submitted.stdout
    assert "(1 empty_text)" in submitted.stdout  # why it failed, by code
    assert re.search(rf"{job_id} (queued|running|partially_succeeded): \d/(\d|\?) documents, .* tokens/s, ETA", submitted.stderr)
    assert "━" not in submitted.output
    status = cli("status", job_id, env=env)
    assert status.exit_code == ExitCode.PARTIAL and "manifest   s3://" in status.stdout
    assert "failed     line 6 (id 'blank'): text is empty" in status.stdout  # the first messages
    assert json.loads(cli("status", job_id, "--json", env=env).stdout)["counts"] == {
        "total": 6, "completed": 5, "failed": 1, "not_processed": 0}
    results = cli("results", job_id, "--out", str(tmp_path / "out"), env=env)
    assert results.exit_code == 0 and "(1 records)" in results.stdout
    (error,) = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert error["id"] == "blank" and error["code"] == "empty_text"
    listed = cli("jobs", "--limit", "1", env=env)
    header, row = listed.stdout.splitlines()
    assert listed.exit_code == 0 and header.split()[:6] == ["JOB", "STATUS", "COMPLETED", "FAILED", "TOTAL", "TOKENS"]
    assert row.split()[:5] == [job_id, "partially_succeeded", "5", "1", "6"] and "more: poolq jobs --before" in listed.stderr


@pytest.mark.integration
def test_submit_a_uri_with_output_options_then_wait_json(stack, env, sample_documents):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        uri = client.upload(("".join(json.dumps(d) + "\n" for d in _docs(sample_documents, 4))).encode())
        submitted = cli("submit", uri, "--dtype", "float16", "--dimensions", "64", "--json", env=env)
        assert submitted.exit_code == 0, submitted.output
        job = json.loads(submitted.stdout)
        waited = cli("wait", job["id"], "--poll-interval", "0.2", "--json", env=env)
        assert waited.exit_code == 0 and json.loads(waited.stdout)["status"] == "succeeded"
        ids, vectors = client.read_numpy(job["id"])
        assert len(ids) == 4 and vectors.shape == (4, 64) and client.results(job["id"])["output"]["dtype"] == "float16"


@pytest.mark.integration
def test_refusals_have_clear_messages_and_exit_codes(stack, env, tmp_path, closed_port):
    missing = cli("status", "0" * 32, env=env)
    assert missing.exit_code == ExitCode.NOT_FOUND and missing.stderr == f"error: HTTP 404: job {'0' * 32!r} not found\n"
    invalid = cli("submit", "s3://elsewhere/x.jsonl", "--long-documents", '{"mode": "squash"}', env=env)
    assert invalid.exit_code == ExitCode.REFUSED and "HTTP 422: the request was invalid:" in invalid.stderr
    assert "  body.long_documents.mode: " in invalid.stderr and "Traceback" not in invalid.output
    wrong_key = cli("jobs", env={**env, "POOLQ_API_KEY": "pq_not_a_real_key"})
    assert wrong_key.exit_code == ExitCode.REFUSED and "HTTP 401: the API key is not valid" in wrong_key.stderr
    assert "pq_not_a_real_key" not in wrong_key.output
    no_key = cli("jobs", env={**env, "POOLQ_API_KEY": ""})
    assert no_key.exit_code == ExitCode.REFUSED and "set POOLQ_API_KEY or pass --api-key" in no_key.stderr
    not_admin = cli("schedules", "list", "--api-key", _tenant_key(stack, admin=False), env=env)
    assert not_admin.exit_code == ExitCode.REFUSED and "HTTP 403: this needs an admin key" in not_admin.stderr
    unreachable = cli("jobs", "--api-url", f"http://127.0.0.1:{closed_port}", env=env)
    assert unreachable.exit_code == ExitCode.UNAVAILABLE and "cannot reach the poolq API" in unreachable.stderr
    assert cli("results", "0" * 32, env=env).exit_code == ExitCode.NOT_FOUND  # --out defaults to ./<job id>/
    no_file = cli("submit", str(tmp_path / "nope.jsonl"), env=env)
    assert no_file.exit_code == 2 and "is not a file" in no_file.output


@pytest.mark.integration
def test_bad_options_are_refused_before_the_file_is_uploaded(stack, env, sample_documents, tmp_path):
    from poolq.jobs.ledger.layout import ServiceLayout
    from poolq.storage import S3Config, S3ObjectStore, make_s3_client

    config = S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"])
    store = S3ObjectStore(make_s3_client(config), stack["bucket"], config)
    uploads = ServiceLayout("jobs").uploads_prefix("dev")
    before = set(store.list(uploads))
    source = _jsonl(tmp_path / "big.jsonl", _docs(sample_documents, 3))
    refused = cli("submit", str(source), "--long-documents", '{"mode": "chunk"}', env=env)
    assert refused.exit_code == ExitCode.REFUSED and "body.long_documents.mode" in refused.stderr
    assert "uploaded" not in refused.output and set(store.list(uploads)) == before  # nothing was uploaded


@pytest.mark.integration
def test_keys_and_client_verbs_find_the_local_stack_by_themselves(stack, tmp_path):
    # Given no POOLQ_* settings but where the stack lives, from another directory
    clean = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    clean["POOLQ_DEV_DIR"] = stack["dir"]

    def run(*args):
        return subprocess.run([sys.executable, "-m", "poolq.api", *args], cwd=tmp_path, env=clean,
                              capture_output=True, text=True, timeout=120)

    # When a key is created and used, and a verb runs with no key at all
    created = run("keys", "create", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    as_acme = run("jobs", "--api-key", key)
    as_dev = run("jobs")
    # Then the key is in the stack's store, the API accepts it, and the dev key is the default
    assert as_acme.returncode == 0, as_acme.stderr
    assert as_acme.stdout.splitlines() == [as_acme.stdout.splitlines()[0]]  # a new tenant: the header alone
    assert as_dev.returncode == 0 and len(as_dev.stdout.splitlines()) > 1  # the dev tenant's jobs of this module
    assert "Traceback" not in created.stderr + as_acme.stderr + as_dev.stderr
    status = run("dev", "status")
    assert f"API key (tenant dev, admin): {stack['api_key']}" in status.stdout
    assert f"Flower login (poolq flower): poolq:{stack['flower_password']}" in status.stdout


def test_store_errors_are_one_line_naming_what_was_tried(tmp_path, closed_port):
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    endpoint = f"http://127.0.0.1:{closed_port}"
    env.update(POOLQ_STORE="s3", POOLQ_S3_ENDPOINT_URL=endpoint, POOLQ_S3_ACCESS_KEY_ID="x", POOLQ_S3_SECRET_ACCESS_KEY="y",
               POOLQ_DEV_DIR=str(tmp_path / "no-stack"), POOLQ_S3_MAX_ATTEMPTS="1")
    unsigned = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "list"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    assert unsigned.returncode == 2 and unsigned.stderr.startswith("error: POOLQ_KEY_SIGNING_SECRET must be set")
    assert len(unsigned.stderr.splitlines()) == 1  # key records are signed: no key store without the secret
    env["POOLQ_KEY_SIGNING_SECRET"] = TEST_KEY_SIGNING_SECRET
    listed = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "list"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == ExitCode.UNAVAILABLE and "Traceback" not in listed.stderr
    assert listed.stderr.startswith(f"error: cannot use bucket 'poolq' at {endpoint}: ") and len(listed.stderr.splitlines()) == 1
    assert "POOLQ_S3_ENDPOINT_URL" in listed.stderr and "poolq dev up" in listed.stderr


@pytest.mark.integration
def test_cancel_then_wait_exits_1_and_cancel_again_is_refused(env, sample_documents, tmp_path):
    docs = [{"id": f"{d['id']}-{copy}", "text": d["text"]} for copy in range(4) for d in sample_documents]
    job_id = cli("submit", str(_jsonl(tmp_path / "big.jsonl", docs)), "--long-documents", '{"mode": "chunked"}',
                 env=env).stdout.strip()
    cancelled = cli("cancel", job_id, env=env)
    assert cancelled.exit_code == 0 and cancelled.stdout.strip() in (f"job {job_id} cancelling", f"job {job_id} cancelled")
    waited = cli("wait", job_id, "--poll-interval", "0.2", "--timeout", "60", env=env)
    assert waited.exit_code == ExitCode.JOB_FAILED and f"job {job_id} cancelled" in waited.stdout
    again = cli("cancel", job_id, env=env)
    assert again.exit_code == ExitCode.REFUSED and "HTTP 409" in again.stderr and "already finished: cancelled" in again.stderr
    assert cli("status", job_id, env=env).exit_code == ExitCode.JOB_FAILED


@pytest.mark.integration
def test_schedules_create_list_get_run_delete(stack, env, sample_documents):
    with PoolqClient(stack["api_url"], stack["api_key"]) as client:
        uri = client.upload(("".join(json.dumps(d) + "\n" for d in _docs(sample_documents, 3))).encode())
    bad = cli("schedules", "create", "--cron", "* * *", "--input", uri, env=env)
    assert bad.exit_code == ExitCode.REFUSED and "  body.cron: " in bad.stderr
    created = cli("schedules", "create", "--cron", "0 3 * * *", "--input", uri, "--disabled",
                  "--template", '{"long_documents": {"mode": "truncate"}}', env=env)
    assert created.exit_code == 0, created.output
    schedule_id = created.stdout.strip()
    listed = cli("schedules", "list", env=env)
    assert listed.exit_code == 0 and f"{schedule_id}  0 3 * * *" in listed.stdout and "disabled" in listed.stdout
    run = cli("schedules", "run", schedule_id, env=env)
    assert run.exit_code == 0 and JOB_ID.fullmatch(run.stdout.strip())
    assert cli("wait", run.stdout.strip(), "--poll-interval", "0.2", env=env).exit_code == 0
    shown = cli("schedules", "get", schedule_id, env=env)
    assert shown.exit_code == 0 and f"job {run.stdout.strip()}  succeeded  (by hand)" in shown.stdout
    assert cli("schedules", "delete", schedule_id, env=env).exit_code == 0
    gone = cli("schedules", "get", schedule_id, env=env)
    assert gone.exit_code == ExitCode.NOT_FOUND and "not found" in gone.stderr


# Without services ------------------------------------------------------------------------------


@pytest.mark.parametrize("status, code", [(400, 5), (401, 5), (403, 5), (404, 4), (409, 5), (413, 5), (422, 5),
                                          (429, 5), (500, 3), (501, 3), (502, 3), (503, 3)])
def test_every_http_refusal_maps_to_a_documented_exit_code(status, code):
    assert exit_code_for(PoolqError(status, "x")) == code


def test_error_messages_name_fields_and_retry_after():
    invalid = PoolqError(422, [{"loc": ["body", "input", "uri"], "msg": "not allowed"}, {"loc": ["header", "x"], "msg": "m"}])
    assert error_message(invalid) == "HTTP 422: the request was invalid:\n  body.input.uri: not allowed\n  header.x: m"
    assert error_message(PoolqError(429, "slow down", retry_after=30)) == "HTTP 429: slow down (retry after 30 s)"
    assert "--api-key" in error_message(PoolqError(401, "send an API key"), api_key_given=False)
    assert "--api-key" not in error_message(PoolqError(401, "bad key"), api_key_given=True)


def test_plain_progress_lines_and_rates(capsys):
    clock = iter([0.0, 0.0, 2.0, 2.0, 10.0, 10.0]).__next__
    progress = PlainJobProgress(every_s=5.0, clock=clock)
    job = {"id": "j", "status": "running", "counts": {"total": 100, "completed": 0, "failed": 0}, "usage": {"tokens": 0}}
    progress.update(job_status(job))  # t=0: the first running poll, printed (status changed)
    progress.update(job_status({**job, "counts": {"total": 100, "completed": 10, "failed": 0}, "usage": {"tokens": 1000}}))
    # above, t=2: too soon (no line); below, t=10: a line
    progress.update(job_status({**job, "counts": {"total": 100, "completed": 50, "failed": 0}, "usage": {"tokens": 5000}}))
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["j running: 0/100 documents, 0 tokens, - tokens/s, ETA -:--:--",
                     "j running: 50/100 documents, 5,000 tokens, 500 tokens/s, ETA 0:00:10"]
    assert format_eta(3725) == "1:02:05"


def test_a_finished_jobs_rate_uses_the_servers_times():
    rate = Throughput(clock=lambda: 0.0)
    rate.observe(job_status({"id": "j", "status": "succeeded", "counts": {"total": 4, "completed": 4, "failed": 0},
                             "usage": {"tokens": 800}, "started_at": "2026-01-01T00:00:00+00:00",
                             "finished_at": "2026-01-01T00:00:02+00:00"}))
    assert rate.tokens_per_s == 400 and rate.documents_per_s == 2


# Helpers ---------------------------------------------------------------------------------------


def _run_in_terminal(args: list[str], env: dict, timeout: float = 120) -> tuple[int, str]:
    """Run `python -m poolq.api ARGS` with a pseudo-terminal as stdin, stdout and stderr; everything it drew."""
    master, slave = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "poolq.api", *args], cwd=REPO_ROOT, stdin=slave, stdout=slave, stderr=slave,
                               env={**os.environ, **env, "TERM": "xterm", "COLUMNS": "100", "LINES": "30"})
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def _tenant_key(stack: dict, *, admin: bool) -> str:
    from poolq.jobs.settings import Settings
    from poolq.jobs.tenancy.api_keys import ApiKeyStore
    from poolq.storage import S3Config, S3ObjectStore, make_s3_client

    config = S3Config(stack["s3_endpoint"], stack["access_key_id"], stack["secret_access_key"])
    store = S3ObjectStore(make_s3_client(config), stack["bucket"], config)
    key, _ = ApiKeyStore(store, Settings.flat_fields()["output_prefix"].default,
                         signing_secret=stack["key_signing_secret"]).create("dev", admin=admin)
    return key


@pytest.mark.integration
def test_sink_retry_is_refused_for_a_job_with_nothing_to_retry(env, sample_documents, tmp_path):
    job_id = cli("submit", str(_jsonl(tmp_path / "one.jsonl", _docs(sample_documents, 1))), env=env).stdout.strip()
    assert cli("wait", job_id, "--poll-interval", "0.2", "--timeout", "120", env=env).exit_code == ExitCode.OK
    refused = cli("sink", "retry", job_id, env=env)
    assert refused.exit_code == ExitCode.REFUSED and "HTTP 409" in refused.stderr and "no failed sink load" in refused.stderr
    assert cli("sink", "retry", "f" * 32, env=env).exit_code == ExitCode.NOT_FOUND
