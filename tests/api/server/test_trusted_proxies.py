"""X-Forwarded-For counts only from the proxies in POOLQ_TRUSTED_PROXIES (empty: never), and the
failed-authentication limit keys on the address that yields: the rule, the app (ASGI, with a
client address), and ``poolq serve`` as a real process (uvicorn's own proxy handling must be off)."""
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.api.server.guards.client_address import TrustedProxies
from poolq.devtools.devstack.ports import wait_listening_port
from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.api_keys import ApiKeyStore

REPO_ROOT = Path(__file__).resolve().parents[3]
BAD_KEY = {"Authorization": "Bearer pq_nosuchkey_0000000000000000"}
BURST = 3


# -- the rule ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("trusted, peer, forwarded, expected", [
    ("", "127.0.0.1", ["198.51.100.9"], "127.0.0.1"),  # nothing trusted: the header is not read
    ("10.0.0.0/8", "203.0.113.5", ["198.51.100.9"], "203.0.113.5"),  # an untrusted peer wrote it
    ("10.0.0.0/8", "10.1.2.3", ["198.51.100.9"], "198.51.100.9"),
    # the client wrote "1.1.1.1" itself; the proxy appended the address it saw: the rightmost untrusted
    ("10.0.0.0/8", "10.1.2.3", ["1.1.1.1, 198.51.100.9"], "198.51.100.9"),
    ("10.0.0.0/8, 192.168.0.7", "10.1.2.3", ["1.1.1.1, 198.51.100.9", "192.168.0.7"], "198.51.100.9"),
    ("10.0.0.0/8", "10.1.2.3", ["10.9.9.9, 10.8.8.8"], "10.9.9.9"),  # every hop a proxy: the first
    ("10.0.0.0/8", "10.1.2.3", [], "10.1.2.3"),
    ("::1", "::1", ["2001:db8::7"], "2001:db8::7"),
])
def test_the_client_address_is_the_rightmost_hop_no_trusted_proxy_wrote(trusted, peer, forwarded, expected):
    assert TrustedProxies.parse(trusted).client_address(peer, forwarded) == expected


def test_a_trusted_proxy_that_is_not_an_address_is_refused_naming_it():
    with pytest.raises(ValueError, match="'10.0.0.0/33'"):
        TrustedProxies.parse("127.0.0.1, 10.0.0.0/33")


# -- the app, called from a given address ------------------------------------------------------------------

def _app(tmp_path, trusted: str):
    settings = Settings(store="local", local_store_root=tmp_path, trusted_proxies=trusted,
                        auth_failure_burst=BURST, auth_failure_rate_per_s=0.01)
    return create_app(holding_context(settings), settings, checks=[])


def _statuses(client: TestClient, forwarded: list[str]) -> list[int]:
    return [client.get("/v1/jobs", headers={**BAD_KEY, "X-Forwarded-For": value}).status_code for value in forwarded]


def test_without_trusted_proxies_a_forged_header_does_not_escape_the_failed_auth_limit(tmp_path):
    client = TestClient(_app(tmp_path, ""), client=("127.0.0.1", 50000))
    forged = [f"198.51.100.{n}" for n in range(BURST + 2)]
    assert _statuses(client, forged) == [401] * BURST + [429, 429]


def test_behind_a_trusted_proxy_each_client_has_its_own_budget(tmp_path):
    proxy = TestClient(_app(tmp_path, "10.0.0.0/8"), client=("10.0.0.2", 50000))
    clients = [f"198.51.100.{n}" for n in range(BURST + 2)]
    assert _statuses(proxy, clients) == [401] * (BURST + 2)  # different clients
    one_client = [f"{n}.{n}.{n}.{n}, 203.0.113.50" for n in range(1, BURST + 3)]  # it forges the left hops
    assert _statuses(proxy, one_client) == [401] * BURST + [429, 429]
    # A caller that is not the proxy cannot claim to be someone else
    direct = TestClient(proxy.app, client=("203.0.113.99", 50000))
    assert _statuses(direct, [f"198.51.101.{n}" for n in range(BURST + 1)]) == [401] * BURST + [429]


# -- `poolq serve`, a real uvicorn --------------------------------------------------------------------------

@pytest.fixture
def serve(tmp_path, redis_url):
    """Start ``poolq serve`` (local store, a Redis database of its own) with extra env; yields (url, key)."""
    url = redis_url.rsplit("/", 1)[0] + "/7"
    procs = []

    def start(**env: str) -> tuple[str, str]:
        redis.Redis.from_url(url).flushdb()
        store = tmp_path / f"store-{uuid.uuid4().hex[:6]}"
        settings = Settings(store="local", local_store_root=store)
        ApiKeyStore.from_settings(settings.storage.object_store(), settings).create("acme")  # the store exists
        log = (tmp_path / "serve.log").open("ab")
        variables = {**os.environ, "POOLQ_REDIS_URL": url, "POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(store),
                     "POOLQ_AUTH_FAILURE_BURST": str(BURST), "POOLQ_AUTH_FAILURE_RATE_PER_S": "0.01",
                     "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
                     **env}
        proc = subprocess.Popen([sys.executable, "-m", "poolq.api", "serve", "--port", "0"], cwd=REPO_ROOT,
                                stdout=log, stderr=subprocess.STDOUT, env=variables)
        procs.append(proc)
        port = wait_listening_port(proc.pid, 60, "poolq serve", log_path=tmp_path / "serve.log")
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=15)


def _served_statuses(base_url: str, forwarded: list[str]) -> list[int]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        return [client.get("/v1/jobs", headers={**BAD_KEY, "X-Forwarded-For": value}).status_code
                for value in forwarded]


@pytest.mark.integration
def test_a_real_server_ignores_x_forwarded_for_unless_told_to_trust_the_proxy(serve):
    forged = [f"198.51.100.{n}" for n in range(BURST + 2)]
    # Without POOLQ_TRUSTED_PROXIES: every request is 127.0.0.1's, whatever the header says
    assert _served_statuses(serve(), forged) == [401] * BURST + [429, 429]
    # With the proxy (here: this test, on loopback) trusted: each forwarded client has its own budget
    assert _served_statuses(serve(POOLQ_TRUSTED_PROXIES="127.0.0.1"), forged) == [401] * (BURST + 2)
