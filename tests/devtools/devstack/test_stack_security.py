"""`poolq dev up`, for real, keeps its doors shut to other local processes: Redis asks for its
password, S3 for its keys, SeaweedFS's other ports for its certificate or JWT; a key record put
straight into the bucket without the stack's signing secret gets a 401 from the API; its files are
its owner's (0700 / 0600); `up` prints no secret, `status` shows them to the owner, and `poolq
flower` asks for its login. One stack for the module (about a minute)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import boto3
import httpx
import pytest
import redis
from botocore.config import Config
from redis.backoff import NoBackoff
from redis.retry import Retry
from support.dev_stack import REPO_ROOT, dev_stack, poolq
from support.open_doors import http_get, serves_tls_without_a_client_certificate, speaks_plain_grpc
from support.private_tree import assert_private_tree

from poolq.devtools.devstack.ports import listening_ports, wait_listening_port
from poolq.devtools.devstack.process import process_cmdline

pytestmark = pytest.mark.integration

SECRETS = ("secret_access_key", "redis_password", "key_signing_secret", "flower_password", "api_key")


@pytest.fixture(scope="module")
def stack():
    # Under a folder every user may enter (pytest's own temp folder is its owner's alone), so that
    # what keeps other users out is the stack's own modes.
    parent = Path(tempfile.mkdtemp(prefix="poolq-doors-"))
    parent.chmod(0o755)
    try:
        with dev_stack(parent / "stack") as info:
            yield info
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _s3(stack: dict):
    return boto3.client(
        "s3",
        endpoint_url=stack["s3_endpoint"],
        aws_access_key_id=stack["access_key_id"],
        aws_secret_access_key=stack["secret_access_key"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )


def test_up_prints_no_secret_and_no_command_line_holds_one(stack):
    assert all(stack[name] for name in SECRETS)
    for name in SECRETS:
        assert stack[name] not in stack["up_output"], name
    assert "poolq dev status" in stack["up_output"]
    for service, pid in stack["pids"].items():
        cmdline = process_cmdline(pid) or ""
        assert not [name for name in SECRETS if stack[name] in cmdline], service  # `ps` shows them to every user


def test_status_shows_the_secrets_to_the_owner_only_through_a_private_file(stack):
    plain = poolq("dev", "status", "--dir", stack["dir"])
    assert plain.returncode == 0, plain.stderr
    assert stack["api_key"] in plain.stdout and f"poolq:{stack['flower_password']}" in plain.stdout
    assert stack["redis_password"] not in plain.stdout  # the URL it prints is the address alone
    state_file = Path(stack["dir"]) / "stack.json"
    assert oct(state_file.stat().st_mode & 0o777) == oct(0o600) and json.loads(state_file.read_text())["api_key"]


def test_every_directory_is_0700_and_every_file_0600(stack):
    root = Path(stack["dir"])
    assert {p.name for p in root.iterdir()} >= {"stack.json", "logs", "redis", "seaweed"}
    assert_private_tree(root)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="acting as another user needs root")
def test_another_user_can_read_no_file_of_the_stack(stack):
    root = Path(stack["dir"])
    assert oct(root.parent.stat().st_mode & 0o777) == oct(0o755)  # the way in is open: the stack's own modes decide
    files = [
        root / "stack.json",
        root / "logs" / "api.log",
        root / "redis" / "redis.conf",
        root / "seaweed" / "s3-identities.json",
        root / "seaweed" / "security" / "weed.key",
    ]
    for path in [*files, *(root / "seaweed").glob("*.dat")]:
        assert path.exists(), path
        read = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(path)], capture_output=True, timeout=30
        )
        assert read.returncode != 0 and b"Permission denied" in read.stderr, (path, read.stdout[:100])
    listing = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ls", str(root)], capture_output=True, timeout=30
    )
    assert listing.returncode != 0 and b"Permission denied" in listing.stderr


def test_redis_refuses_a_client_without_the_password(stack):
    anonymous = redis.Redis(host="127.0.0.1", port=stack["ports"]["redis"], retry=Retry(NoBackoff(), 0), socket_timeout=5)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.keys("*")
    wrong = redis.Redis(host="127.0.0.1", port=stack["ports"]["redis"], password="guess", retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.exceptions.AuthenticationError):
        wrong.ping()
    assert redis.Redis.from_url(stack["redis_url"]).ping()  # the URL the stack's processes use carries it


def test_seaweedfs_serves_nothing_to_a_client_without_keys_or_certificate(stack):
    s3 = _s3(stack)
    s3.put_object(Bucket=stack["bucket"], Key="jobs/dev/uploads/doors.jsonl", Body=b"tenant dev's private text")
    anonymous = httpx.get(f"{stack['s3_endpoint']}/{stack['bucket']}/jobs/dev/uploads/doors.jsonl", timeout=5)
    assert anonymous.status_code == 403
    internal = listening_ports(stack["pids"]["seaweed"]) - {stack["ports"]["s3"]}
    assert len(internal) >= 8, internal
    for port in sorted(internal):
        response = http_get(port, f"/buckets/{stack['bucket']}/jobs/dev/uploads/doors.jsonl")
        assert response is None or b"private text" not in response.content, port
        assert not speaks_plain_grpc(port) and not serves_tls_without_a_client_certificate(port), port


def _record(key_id: str, secret: str) -> dict:
    return {
        "key_id": key_id,
        "tenant": "dev",
        "scopes": ["jobs", "admin"],
        "name": "forged",
        "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(),
        "created_at": "2026-01-01T00:00:00+00:00",
        "revoked_at": None,
    }


def test_a_key_record_written_straight_into_the_bucket_is_refused_by_the_api(stack):
    api, s3 = stack["api_url"], _s3(stack)
    assert httpx.get(f"{api}/v1/schedules", headers={"Authorization": f"Bearer {stack['api_key']}"}).status_code == 200
    forgeries = {
        "0000000000000001": _record("0000000000000001", "A" * 43),  # no tag
        "0000000000000002": {**_record("0000000000000002", "B" * 43), "tag": "v1:" + "0" * 64},
    }  # a made-up one
    for key_id, record in forgeries.items():
        s3.put_object(Bucket=stack["bucket"], Key=f"jobs/_auth/keys/{key_id}.json", Body=json.dumps(record).encode())
    for key_id, secret in (("0000000000000001", "A" * 43), ("0000000000000002", "B" * 43)):
        for route in ("/v1/schedules", "/v1/jobs"):
            response = httpx.get(f"{api}{route}", headers={"Authorization": f"Bearer pq_{key_id}_{secret}"})
            assert response.status_code == 401, (route, response.text)
    log = (Path(stack["dir"]) / "logs" / "api.log").read_text()
    assert "0000000000000001.json rejected: no valid signature" in log and "WARNING" in log


def test_flower_asks_for_the_login_status_shows(stack, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLQ_")}
    env |= {"POOLQ_DEV_DIR": stack["dir"], "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH")]))}
    with (tmp_path / "flower.log").open("wb") as log:
        flower = subprocess.Popen(
            [sys.executable, "-m", "poolq.api", "flower", "--port", "0"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        port = wait_listening_port(flower.pid, 60, "Flower", log_path=tmp_path / "flower.log")
        url = f"http://127.0.0.1:{port}/workers"  # the UI's page of workers (without a login: 200, every task)
        anonymous = httpx.get(url, timeout=10)
        assert anonymous.status_code == 401 and "basic" in anonymous.headers.get("www-authenticate", "").lower()
        assert httpx.get(url, auth=("poolq", "wrong"), timeout=10).status_code == 401
        assert httpx.get(url, auth=("poolq", stack["flower_password"]), timeout=10).status_code == 200
        assert stack["flower_password"] not in (process_cmdline(flower.pid) or "")
    finally:
        os.killpg(flower.pid, signal.SIGTERM)
        flower.wait(15)
