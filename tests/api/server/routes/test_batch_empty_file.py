"""``POST /v1/batches`` naming an input file of no bytes: OpenAI's 400, which the official client
raises as ``BadRequestError`` with ``code`` ``empty_file`` and ``param`` ``input_file_id``."""
import httpx
import openai
import pytest
from support.api_client import InProcessTransport, authed_client

from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context


class _ReadingTransport(InProcessTransport):
    """Reads a streamed request body (the client's multipart upload) before handing it on."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return super().handle_request(request)


def test_an_empty_input_file_is_a_bad_request_naming_it(tmp_path):
    client = authed_client(local_context(tmp_path / "store", Settings()))
    http_client = httpx.Client(transport=_ReadingTransport(client), base_url="http://testserver")
    api = openai.OpenAI(api_key=client.api_key, base_url="http://testserver/v1", http_client=http_client, max_retries=0)
    uploaded = api.files.create(file=("empty.jsonl", b""), purpose="batch")
    with pytest.raises(openai.BadRequestError) as refused:
        api.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")
    error = refused.value
    assert (error.status_code, error.code, error.param, error.type) == (400, "empty_file", "input_file_id",
                                                                        "invalid_request_error")
    assert uploaded.id in error.message and "no request line" in error.message
    assert api.batches.list().data == []  # nothing was created
