"""The client verbs print what they printed when the client answered with JSON dicts: ``--json`` is
the API's JSON, times and states as it spells them; and they read the typed answers by attribute
(no deprecated dict access). In-process API (jobs run inside the request), no services."""
import json
import re
import warnings

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from support.api_client import InProcessTransport, authed_client

from poolq.api.cli import output
from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient

DOCS = [{"id": f"d{i}", "text": f"document number {i}"} for i in range(3)]


@pytest.fixture
def api(local_ctx, monkeypatch):
    """The API's test client; the CLI's PoolqClient talks to the same app."""
    client = authed_client(local_ctx)
    keyless = TestClient(client.app)
    monkeypatch.setattr(output, "PoolqClient", lambda url, key: PoolqClient(url, key, transport=InProcessTransport(keyless)))
    return client


@pytest.fixture
def cli(api):
    def run(*args: str):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = CliRunner().invoke(main, [*args, "--api-url", "http://testserver", "--api-key", api.api_key])
        assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [], args
        return result

    return run


@pytest.fixture
def prefix(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "part-1.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return (tmp_path / "docs").as_uri() + "/"


def test_job_verbs_print_the_apis_json_and_its_times(api, cli, prefix, tmp_path):
    submitted = cli("submit", prefix + "part-1.jsonl")
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    status = api.get(f"/v1/jobs/{job_id}").json()
    for verb in ("status", "wait"):
        shown = cli(verb, job_id, "--json")
        assert shown.exit_code == 0 and json.loads(shown.stdout) == status, shown.output
    details = cli("status", job_id).stdout.splitlines()
    assert re.fullmatch(rf"job {job_id} succeeded: 3/3 documents, 0 failed, {status['usage']['tokens']:,} tokens in [\d.]+ s",
                        details[0])
    assert details[1:5] == [f"  model      {status['model']}", f"  created    {status['created_at']}",
                            f"  started    {status['started_at']}", f"  finished   {status['finished_at']}"]
    assert details[5] == f"  manifest   {status['result']['manifest_uri']}"
    waited = cli("wait", job_id)
    assert waited.exit_code == 0 and waited.stdout.strip() == details[0]
    listed = cli("jobs", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == api.get("/v1/jobs", params={"limit": 20}).json()
    [row] = cli("jobs").stdout.splitlines()[1:]
    assert row.split() == [job_id, "succeeded", "3", "0", "3", f"{status['usage']['tokens']:,}", status["created_at"]]
    results = cli("results", job_id, "--out", str(tmp_path / "out"))
    assert results.exit_code == 0 and results.stdout.splitlines()[-1] == \
        f"job {job_id} succeeded: 3 rows in 1 parts; 3 documents embedded, 0 failed"
    refused = cli("cancel", job_id)
    assert refused.exit_code == output.ExitCode.REFUSED and "already finished: succeeded" in refused.stderr


def test_schedule_verbs_print_the_apis_json_and_its_times(api, cli, prefix):
    created = cli("schedules", "create", "--cron", "0 3 * * *", "--input", prefix, "--disabled")
    assert created.exit_code == 0, created.output
    schedule_id = created.stdout.strip()
    listed = cli("schedules", "list", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == api.get("/v1/schedules").json()["schedules"]
    assert cli("schedules", "list").stdout.strip() == f"{schedule_id}  0 3 * * *        disabled  {prefix}"
    ran = cli("schedules", "run", schedule_id, "--json")
    run = json.loads(ran.stdout)
    assert ran.exit_code == 0 and run["status"] == "succeeded" and run["manual"] is True
    detail = api.get(f"/v1/schedules/{schedule_id}").json()
    assert json.loads(cli("schedules", "get", schedule_id, "--json").stdout) == detail
    assert cli("schedules", "get", schedule_id).stdout.splitlines()[1] == \
        f"  {detail['runs'][0]['slot']}  job {run['job_id']}  succeeded  (by hand)"
