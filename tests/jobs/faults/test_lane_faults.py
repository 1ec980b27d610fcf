"""The interactive lane when its worker dies: kill -9 of a worker while it answers a
``POST /v1/embeddings`` request and runs a job's shard. The request gets a clean 503 with
Retry-After (never a hang), its retry is answered once a worker is back, and the job still ends
with every record exactly once."""
import threading

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.integration

SLOW_S = 0.3  # per result: a shard of 3 documents, or a lane request of 8 inputs, takes a while
TIMEOUT_S = 8  # the API's wait for a worker's answer


@pytest.mark.settings(embeddings_timeout_s=TIMEOUT_S)
def test_kill_9_of_a_worker_serving_the_lane_and_a_shard(deployment, documents, reference):
    # Given the API, beat (the reconciler) and one slow worker embedding a job's shard
    deployment.start_api()
    worker = deployment.start_worker("w1", slow_s=SLOW_S)
    deployment.start_beat()
    job_id = deployment.submit(documents)
    deployment.wait_shard_lease(job_id)
    deployment.wait_started_embedding()
    # and an embeddings request the same worker is answering, between two steps of that shard
    texts = [d["text"][:2000] for d in documents[:8]]  # past the 256-token window: truncated as the job's are
    body = {"model": "all-MiniLM-L6-v2", "input": texts, "long_documents": {"mode": "truncate"}}
    headers = {"Authorization": f"Bearer {deployment.api_key}"}
    answers: list[httpx.Response] = []

    def ask() -> None:
        answers.append(httpx.post(f"{deployment.api_url}/v1/embeddings", json=body, headers=headers, timeout=120))

    asking = threading.Thread(target=ask)
    asking.start()
    deployment.wait(lambda: deployment.events("lane_runs") or answers, 60, "the worker to take the embeddings request", 0.05)
    assert not answers, f"answered before the worker took it: {answers[0].status_code} {answers[0].text[:300]}"
    deployment.wait_shard_lease(job_id)  # (the lane request takes a few seconds: shards go on meanwhile)
    # When the worker and its pool are killed (-9), the request and a shard in hand
    deployment.kill_group(worker)
    # Then the request is answered 503 with Retry-After once its deadline passes, not left hanging
    asking.join(120)
    assert not asking.is_alive(), "the embeddings request hung"
    [answer] = answers
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["Retry-After"]) > 0 and "no compute worker answered" in answer.json()["error"]["message"]
    # and once a worker is back, the retry gets the vectors a clean run makes
    deployment.start_worker("w2")
    retried = httpx.post(f"{deployment.api_url}/v1/embeddings", json=body, headers=headers, timeout=120)
    assert retried.status_code == 200, retried.text
    vectors = np.array([item["embedding"] for item in retried.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(vectors, np.stack([reference[d["id"]] for d in documents[:8]]), rtol=0, atol=1e-6)
    # And the job succeeds with every record exactly once (the lane's runs are not job records)
    deployment.check_outcome(job_id, documents, reference)
    assert set(deployment.model_runs_per_document()) == {d["id"] for d in documents}
    assert len(deployment.events("lane_runs")) == 2
