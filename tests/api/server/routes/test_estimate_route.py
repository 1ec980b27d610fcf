"""``POST /v1/jobs/estimate``: a body the job route refuses is refused identically (every refusal
of support/refusals.py, same status, same body), nothing is submitted, and a long estimate runs off the
event loop (other requests are answered). An unreadable input (422 at input.uri) needs a real
bucket: tests/api/test_estimate_e2e.py."""
import json
import threading
import time

import pytest
from fastapi.testclient import TestClient
from support.random_models import save_random_model, tiny_bert_config, write_st_modules
from support.refusals import GRANTED, REFUSALS, TENANT_A, Refusal
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings
from poolq.products.estimate import estimator


def _client(tmp_path, **overrides) -> TestClient:
    settings = Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                        api_key_cache_s=0, allow_file_inputs=False, tenant_input_prefixes={TENANT_A: [GRANTED]},
                        **overrides)
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create(TENANT_A)
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("case", REFUSALS, ids=lambda case: case.name[:60])
def test_estimate_refuses_every_body_submit_refuses_with_the_same_answer(tmp_path, case: Refusal):
    client = _client(tmp_path, **case.settings)
    submitted = client.post("/v1/jobs", json=case.body)
    assert submitted.status_code == 422, submitted.text
    estimated = client.post("/v1/jobs/estimate", json=case.body)
    assert (estimated.status_code, estimated.json()) == (submitted.status_code, submitted.json())
    assert client.get("/v1/jobs").json()["jobs"] == []


def test_an_inline_job_is_estimated_and_nothing_is_submitted(tmp_path):
    client = _client(tmp_path)
    documents = [{"id": f"d{i}", "text": "a sentence of a few words. " * (1 + i)} for i in range(60)]
    documents.append({"id": "again", "text": documents[0]["text"]})
    body = {"input": {"documents": documents}, "long_documents": {"mode": "naive_chunks", "chunk_tokens": 50}}
    answer = client.post("/v1/jobs/estimate", json=body)
    assert answer.status_code == 200, answer.text
    estimate = answer.json()
    assert (estimate["documents"], estimate["duplicates"]["documents"], estimate["duplicates"]["method"]) == (61, 1, "exact")
    assert estimate["rows"] > estimate["documents"] and estimate["tokens"] > estimate["documents"]
    assert estimate["time"]["wall_seconds"] is None and estimate["reuse"] == {"tokens": 0, "source": "none"}
    assert client.get("/v1/jobs").json()["jobs"] == []


def test_a_slow_estimate_does_not_stall_other_requests(tmp_path, monkeypatch):
    release = threading.Event()
    real = estimator.scan_input

    def slow_scan(*args):
        release.wait(30)
        return real(*args)

    monkeypatch.setattr(estimator, "scan_input", slow_scan)
    client = _client(tmp_path)
    body = {"input": {"documents": [{"id": "a", "text": "x y z"}]}}
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(client.post("/v1/jobs/estimate", json=body)))
    waiting.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert client.get("/healthz").status_code == 200 and client.post("/v1/jobs/validate", json=body).status_code == 200
    assert time.monotonic() - started < 5 and not answers  # answered while the estimate still waits
    release.set()
    waiting.join(60)
    assert answers[0].status_code == 200 and json.loads(answers[0].text)["documents"] == 1


def test_the_estimate_of_a_model_without_tokenizer_json_is_a_422_naming_the_model(tmp_path):
    from transformers import BertModel

    # Given a model with a slow tokenizer only (no tokenizer.json, which estimates tokenize with)
    model_dir = tmp_path / "slow"
    model_dir.mkdir()
    save_random_model(model_dir, BertModel, tiny_bert_config())
    write_st_modules(model_dir, 32)
    (model_dir / "tokenizer.json").unlink()
    settings = Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                        api_key_cache_s=0, models={"slow": str(model_dir)})
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create(TENANT_A)
    client = TestClient(app, headers={"Authorization": f"Bearer {key}"}, raise_server_exceptions=False)
    body = {"model": "slow", "input": {"documents": [{"id": "a", "text": "a short document"}]}}
    assert client.post("/v1/jobs/validate", json=body).status_code == 200  # a job it would accept
    # When it is estimated, then the answer is a 422 naming the model, never a server error
    answer = client.post("/v1/jobs/estimate", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "model"] and "tokenizer.json" in answer.text
