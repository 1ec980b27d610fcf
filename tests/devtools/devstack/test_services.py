"""Integration tests: the dev stack's real Redis and SeaweedFS processes.

Every server runs on free loopback ports (ANY_PORT: chosen when it starts) in a
tmp_path directory and is stopped by a context manager, so a failing test still
cleans up.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import redis
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import ClientError
from redis.backoff import NoBackoff
from redis.retry import Retry

from poolq.devtools.devstack.ports import ANY_PORT, port_is_free
from poolq.devtools.devstack.process import ServiceError, pid_alive, read_pid, spawn, stop_pid, wait_until
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer

pytestmark = pytest.mark.integration

BUCKET = "poolq-test"


def s3_client(server: SeaweedServer, secret_key: str | None = None) -> BaseClient:
    """Build a boto3 client the way application code builds one."""
    return boto3.client(
        "s3",
        endpoint_url=server.endpoint_url,
        aws_access_key_id=server.config.access_key,
        aws_secret_access_key=secret_key or server.config.secret_key,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """Return the (ip, port) pairs process ``pid`` listens on over TCP, IPv4 and IPv6."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed since the listing (the server's short-lived connections)
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                hex_ip, hex_port = local.split(":")
                ip = socket.inet_ntoa(bytes.fromhex(hex_ip)[::-1]) if table == "tcp" else hex_ip
                found.add((ip, int(hex_port, 16)))
    return found


# --------------------------------------------------------------------- Redis


def redis_config(data_dir: Path, **kwargs: object) -> RedisConfig:
    return RedisConfig(data_dir=data_dir, port=ANY_PORT, **kwargs)  # type: ignore[arg-type]


def test_redis_starts_on_free_port_and_answers_ping(tmp_path: Path) -> None:
    with RedisServer(redis_config(tmp_path / "redis", password="s3cret/pw")) as server:
        pid = server.running_pid()
        assert pid is not None
        assert listening_addresses(pid) == {("127.0.0.1", server.config.port)}
        assert redis.Redis.from_url(server.url).ping()
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.config.port, retry=Retry(NoBackoff(), 0)).ping()
    assert not pid_alive(pid)
    assert not server.pid_path.exists()


def test_redis_data_survives_restart_with_aof(tmp_path: Path) -> None:
    config = redis_config(tmp_path / "redis")
    with RedisServer(config) as server:
        redis.Redis.from_url(server.url).set("poolq:job", "queued")
    assert (config.data_dir / "appendonly.aof").stat().st_size > 0
    with RedisServer(config) as server:
        assert redis.Redis.from_url(server.url).get("poolq:job") == b"queued"


def test_redis_refuses_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert not port_is_free(port)
        server = RedisServer(RedisConfig(data_dir=tmp_path / "redis", port=port))
        with pytest.raises(ServiceError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
    assert read_pid(server.pid_path) is None


def test_redis_config_refuses_non_loopback_host(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="loopback"):
        RedisConfig(data_dir=tmp_path, port=6379, host="0.0.0.0")


# ------------------------------------------------------------------ process


def test_stop_pid_spares_a_process_with_another_cmdline(tmp_path: Path) -> None:
    pid = spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        log_path=tmp_path / "sleeper.log",
        pid_path=tmp_path / "sleeper.pid",
    )
    try:
        assert read_pid(tmp_path / "sleeper.pid") == pid
        assert stop_pid(pid, expect_in_cmdline="redis-server") is False
        assert pid_alive(pid)
    finally:
        assert stop_pid(pid, expect_in_cmdline="time.sleep(60)", timeout=5) is True
    assert not pid_alive(pid)
    assert stop_pid(pid, expect_in_cmdline=None) is False  # already gone


def test_spawn_names_a_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match="no-such-server-binary"):
        spawn(["no-such-server-binary"], log_path=tmp_path / "x.log", pid_path=None)


def test_wait_until_fails_fast_when_the_process_dies(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    crasher = [sys.executable, "-c", "print('bad flag --nope'); raise SystemExit(3)"]
    pid = spawn(crasher, log_path=log, pid_path=None)
    with pytest.raises(ServiceError, match=r"(?s)crasher exited before becoming ready; see .*crash\.log.*bad flag"):
        wait_until(lambda: False, 30, 0.05, "crasher", log_path=log, pid=pid)


# ---------------------------------------------------------------- SeaweedFS


def seaweed_config(data_dir: Path) -> SeaweedConfig:
    return SeaweedConfig(
        data_dir=data_dir,
        s3_port=ANY_PORT,
        access_key="poolq-test-key",
        secret_key="poolq-test-secret",
        bucket=BUCKET,
    )


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    with SeaweedServer(seaweed_config(tmp_path_factory.mktemp("seaweed"))) as server:
        yield server


def test_seaweed_listens_on_loopback_ports_it_was_given(seaweed: SeaweedServer) -> None:
    pid = seaweed.running_pid()
    assert pid is not None
    assert listening_addresses(pid) == {("127.0.0.1", port) for port in seaweed.config.all_ports()}


def test_seaweed_bucket_exists_and_objects_round_trip(seaweed: SeaweedServer) -> None:
    client = s3_client(seaweed)
    assert BUCKET in [b["Name"] for b in client.list_buckets()["Buckets"]]
    seaweed.ensure_bucket()  # idempotent
    client.put_object(Bucket=BUCKET, Key="results/part-0.parquet", Body=b"PAR1 payload")
    got = client.get_object(Bucket=BUCKET, Key="results/part-0.parquet")["Body"].read()
    assert got == b"PAR1 payload"


def test_seaweed_rejects_a_wrong_secret(seaweed: SeaweedServer) -> None:
    with pytest.raises(ClientError) as info:
        s3_client(seaweed, secret_key="not-the-secret").list_buckets()
    assert info.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_seaweed_enforces_if_none_match_on_existing_key(seaweed: SeaweedServer) -> None:
    client = s3_client(seaweed)
    client.put_object(Bucket=BUCKET, Key="claims/job-1", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=BUCKET, Key="claims/job-1", Body=b"second", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=BUCKET, Key="claims/job-1")["Body"].read() == b"first"


def test_seaweed_stop_leaves_no_process_and_data_persists(tmp_path: Path) -> None:
    data_dir = tmp_path / "seaweed"
    with SeaweedServer(seaweed_config(data_dir)) as server:
        s3_client(server).put_object(Bucket=BUCKET, Key="kept", Body=b"still here")
        pid = server.running_pid()
        assert pid is not None
    assert not pid_alive(pid)
    assert not server.pid_path.exists()
    assert all(port_is_free(port) for port in server.config.all_ports())
    # Restart on the same directory with fresh ports: the object is still there.
    with SeaweedServer(seaweed_config(data_dir)) as again:
        assert s3_client(again).get_object(Bucket=BUCKET, Key="kept")["Body"].read() == b"still here"


def test_buckets_removed_after_use_give_their_volume_back(tmp_path: Path) -> None:
    # SeaweedFS gives each bucket a volume of its own, out of max_volumes: the test session's server
    # outlives many more buckets than that only because every test removes the ones it made
    import dataclasses

    from support.object_stores import bucket_maker

    from poolq.storage import S3Config

    config = dataclasses.replace(seaweed_config(tmp_path / "seaweed"), max_volumes=6)
    with SeaweedServer(config) as server:
        s3 = S3Config(server.endpoint_url, config.access_key, config.secret_key)
        for _ in range(2 * config.max_volumes):
            with bucket_maker(s3) as buckets:
                store = buckets.store("turn")
                store.put("k", b"payload")
                assert store.get("k") == b"payload"
        assert [b["Name"] for b in s3_client(server).list_buckets()["Buckets"]] == [BUCKET]


def test_default_internal_ports_never_take_the_s3_port(monkeypatch, tmp_path: Path) -> None:
    # The kernel may hand the just-released S3 port out again: the internal ports skip it
    from poolq.devtools.devstack import seaweed_ports

    handed_out = iter([40000, 40000, *range(41000, 41100)])
    monkeypatch.setattr(seaweed_ports, "free_port", lambda: next(handed_out))
    monkeypatch.setattr(seaweed_ports, "port_is_free", lambda port: True)
    config = SeaweedConfig(data_dir=tmp_path, s3_port=40000, access_key="k", secret_key="s", bucket="b")
    assert 40000 not in config.all_ports()[1:]
