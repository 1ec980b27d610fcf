"""Every call to the store or Redis has a deadline: against a server that accepts connections and
then never answers (a stalled process), a call fails, retryably, within seconds instead of hanging.
(The fault suite stalls the real services with SIGSTOP: tests/jobs/faults/test_stalls.py.)"""
import socket
import threading
import time

import botocore.exceptions
import pytest
import redis

from poolq.jobs.settings import Settings
from poolq.jobs.steps.failures import is_retryable
from poolq.storage import StorageError
from poolq.worker.celery_app import create_celery_app


@pytest.fixture
def stalled_port():
    """A loopback port whose server accepts every connection and never sends a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def _settings(port: int, **values) -> Settings:
    return Settings(s3_endpoint_url=f"http://127.0.0.1:{port}", s3_access_key_id="k", s3_secret_access_key="s",
                    redis_url=f"redis://127.0.0.1:{port}/0", **values)


def _failure_after(call) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        call()
    return caught.value, time.monotonic() - started


def test_the_apis_store_calls_give_up_on_a_stalled_store_within_seconds(stalled_port):
    settings = _settings(stalled_port)
    error, elapsed = _failure_after(lambda: settings.storage.object_store("api").exists("jobs/_readyz"))
    # 2 tries of a 2 s read deadline, and botocore's backoff between them
    assert isinstance(error, StorageError) and is_retryable(error), error
    assert "timeout" in str(error).lower(), error
    assert elapsed < 7, elapsed  # on a loaded machine; botocore's default is 60 s a try


def test_a_workers_store_calls_wait_longer_and_still_end(stalled_port):
    settings = _settings(stalled_port, s3_worker_read_timeout_s=1.0, s3_max_attempts=1)
    assert Settings().storage.s3_config("worker").read_timeout_s > Settings().storage.s3_config("api").read_timeout_s
    error, elapsed = _failure_after(lambda: settings.storage.object_store("worker").get("jobs/spec.json"))
    assert isinstance(error, StorageError) and is_retryable(error), error
    assert 1.5 < elapsed < 4, elapsed


def test_the_apis_redis_calls_give_up_on_a_stalled_redis_within_seconds(stalled_port):
    client = _settings(stalled_port).broker.redis_client("api")
    error, elapsed = _failure_after(client.ping)
    # one 2 s deadline: a timeout is not retried on the request path (a lost connection is)
    assert isinstance(error, redis.exceptions.TimeoutError) and is_retryable(error), error
    assert elapsed < 3, elapsed


def test_a_workers_redis_calls_have_their_own_longer_deadline(stalled_port):
    client = _settings(stalled_port, redis_worker_timeout_s=0.5, redis_retries=2,
                       redis_health_check_interval_s=0).broker.redis_client("worker")
    error, elapsed = _failure_after(client.ping)
    # 3 tries of 0.5 s: a worker retries a timeout
    assert isinstance(error, redis.exceptions.TimeoutError) and 1.4 < elapsed < 3, (error, elapsed)
    assert Settings().broker.redis_timeout_s("worker") > Settings().broker.redis_timeout_s("api")


def test_the_broker_connections_have_deadlines_too():
    settings = Settings()
    api, worker = create_celery_app(settings, "api"), create_celery_app(settings, "worker")
    for app, role in ((api, "api"), (worker, "worker")):
        options = app.conf.broker_transport_options
        assert options["socket_timeout"] == settings.broker.redis_timeout_s(role)
        assert options["socket_connect_timeout"] == settings.broker.redis_connect_timeout_s
        assert options["visibility_timeout"] == settings.tasks.visibility_timeout_s
    assert api.conf.task_publish_retry_policy["max_retries"] == settings.broker.redis_retries


@pytest.mark.parametrize("error", [
    botocore.exceptions.ReadTimeoutError(endpoint_url="http://store"),
    botocore.exceptions.ConnectTimeoutError(endpoint_url="http://store"),
    botocore.exceptions.EndpointConnectionError(endpoint_url="http://store"),
    redis.exceptions.TimeoutError("Timeout reading from socket"),
])
def test_timeouts_are_declared_retryable(error):
    assert is_retryable(error)
