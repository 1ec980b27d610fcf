"""A dev-stack SeaweedFS serves data on its S3 port only, and only to signed requests: from a plain
local client without credentials, its master, volume, filer and admin ports (HTTP and gRPC) give
no object, take no write, hand out no volume assignment and speak no gRPC. A real ``weed mini``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError
from support.open_doors import http_get, http_put, serves_tls_without_a_client_certificate, speaks_plain_grpc
from support.private_tree import assert_private_tree

from poolq.devtools.devstack.ports import ANY_PORT, listening_ports
from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer

pytestmark = pytest.mark.integration

BUCKET = "poolq-doors"
SECRET_TEXT = b"tenant acme: the merger closes on Friday"
OBJECT_KEY = "jobs/acme/uploads/0123.jsonl"
FORGED_KEY = "jobs/_auth/keys/0123456789abcdef.json"


@pytest.fixture(scope="module")
def weed(tmp_path_factory):
    config = SeaweedConfig(
        data_dir=tmp_path_factory.mktemp("weed-doors"),
        s3_port=ANY_PORT,
        access_key="poolqdoors",
        secret_key="poolq-doors-secret",
        bucket=BUCKET,
    )
    with SeaweedServer(config) as server:
        server.client().put_object(Bucket=BUCKET, Key=OBJECT_KEY, Body=SECRET_TEXT)
        yield server


def _internal_ports(server: SeaweedServer) -> list[int]:
    """Every port weed listens on but S3: what it really bound, not what it was told."""
    pid = server.running_pid()
    assert pid is not None
    ports = listening_ports(pid) - {server.config.s3_port}
    assert len(ports) >= 8, ports  # master, volume, filer, admin: HTTP and gRPC each (and S3's gRPC)
    return sorted(ports)


def test_no_internal_port_serves_an_object_to_a_client_without_credentials(weed):
    for port in _internal_ports(weed):
        for path in (f"/buckets/{BUCKET}/{OBJECT_KEY}", f"/{BUCKET}/{OBJECT_KEY}", f"/buckets/{BUCKET}/jobs/acme/uploads/"):
            response = http_get(port, path)
            assert response is None or SECRET_TEXT not in response.content, (port, path, response.status_code)
            assert response is None or "0123.jsonl" not in response.text, (port, path, response.text[:200])


def test_no_internal_port_takes_a_write_or_hands_out_a_volume_assignment(weed):
    for port in _internal_ports(weed):
        forged = http_put(port, f"/buckets/{BUCKET}/{FORGED_KEY}", b'{"tenant": "acme", "scopes": ["admin"]}')
        assert forged is None or forged.status_code >= 400, (port, forged.status_code, forged.text[:200])
        assignment = http_get(port, "/dir/assign")
        assert assignment is None or "fid" not in assignment.text, (port, assignment.text[:200])
    with pytest.raises(ClientError, match="NoSuchKey|404"):
        weed.client().head_object(Bucket=BUCKET, Key=FORGED_KEY)


def test_no_internal_port_speaks_grpc_without_the_stacks_certificate(weed):
    for port in _internal_ports(weed):
        assert not speaks_plain_grpc(port), port
        assert not serves_tls_without_a_client_certificate(port), port


def test_s3_serves_only_signed_requests(weed):
    anonymous = httpx.get(f"{weed.endpoint_url}/{BUCKET}/{OBJECT_KEY}", timeout=5)
    assert anonymous.status_code == 403 and SECRET_TEXT not in anonymous.content
    listing = httpx.get(f"{weed.endpoint_url}/{BUCKET}?list-type=2", timeout=5)
    assert listing.status_code == 403 and "0123.jsonl" not in listing.text
    put = httpx.put(f"{weed.endpoint_url}/{BUCKET}/{FORGED_KEY}", content=b"{}", timeout=5)
    assert put.status_code == 403
    with pytest.raises(ClientError, match="SignatureDoesNotMatch|AccessDenied|403"):
        weed.client(secret_key="not-the-secret", max_attempts=1).get_object(Bucket=BUCKET, Key=OBJECT_KEY)
    assert weed.client().get_object(Bucket=BUCKET, Key=OBJECT_KEY)["Body"].read() == SECRET_TEXT


def test_its_data_keys_and_logs_are_its_owners_alone(weed):
    root: Path = weed.config.data_dir
    assert (root / "security.toml").exists() and (root / "security" / "weed.key").exists()
    assert not (root / "security" / "ca.key").exists()  # the CA signs one certificate, then its key is gone
    assert_private_tree(root)
