"""Exit codes of docs/clients.md for answers the client cannot read: a server that answers 200 with
something that is not poolq's JSON (a wrong --api-url, a proxy's page) is not a job that failed (1)."""
import httpx
import pytest
from click.testing import CliRunner

from poolq.api.cli import output
from poolq.api.cli.main import main
from poolq.api.client.poolq_client import PoolqClient

JOB = "0" * 32


@pytest.mark.parametrize("verb", ["status", "wait"])
@pytest.mark.parametrize("answer", [
    httpx.Response(200, text="<html><body>Sign in</body></html>", headers={"content-type": "text/html"}),
    httpx.Response(200, json={"id": JOB, "status": "archived"}),  # not a JobStatus
], ids=["html-page", "not-a-job-status"])
def test_an_answer_that_is_not_the_apis_exits_3_with_one_line_not_a_traceback(monkeypatch, verb, answer):
    transport = httpx.MockTransport(lambda request: answer)
    monkeypatch.setattr(output, "PoolqClient", lambda url, key: PoolqClient(url, key, transport=transport))
    result = CliRunner().invoke(main, [verb, JOB, "--api-url", "http://testserver", "--api-key", "k"])
    assert result.exit_code == int(output.ExitCode.UNAVAILABLE), (result.exit_code, repr(result.exception))
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
