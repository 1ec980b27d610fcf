"""Integration tests: a port chosen for a server and taken by another process before the server
binds it (the race a free-port check cannot close). The server is started again on fresh ports
and says which it got; a port the caller gave is never moved. The squatter arrives between our
check and the server's bind, as a real competitor would."""
from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from poolq.devtools.devstack.ports import ANY_PORT, listening_ports, wait_listening_port
from poolq.devtools.devstack.process import PortInUse, spawn, stop_pid
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer
from poolq.devtools.devstack.stack_state import StackState

pytestmark = pytest.mark.integration


class _Squatters:
    """Listening sockets that take ports away from a server about to bind them."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []

    def take(self, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        self.sockets.append(sock)
        return port

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def squatters():
    taken = _Squatters()
    yield taken
    taken.close()


def _beaten_to_its_first_port(server_class, pick_port, squatters: _Squatters):
    """``server_class`` whose first start finds ``pick_port(config)`` taken just before it binds it."""
    class Beaten(server_class):
        def _spawn(self) -> int:
            if not squatters.sockets:
                squatters.take(pick_port(self.config))
            return super()._spawn()
    return Beaten


def test_redis_that_lost_its_port_starts_on_another_and_says_which(tmp_path: Path, squatters) -> None:
    server_class = _beaten_to_its_first_port(RedisServer, lambda config: config.port, squatters)
    with server_class(RedisConfig(data_dir=tmp_path / "redis", port=ANY_PORT)) as server:
        lost = squatters.sockets[0].getsockname()[1]
        assert server.config.port != lost
        assert listening_ports(server.running_pid()) == {server.config.port}
        assert server.url.endswith(f":{server.config.port}/0")


def test_redis_never_moves_off_a_port_it_was_given(tmp_path: Path, squatters) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        given = probe.getsockname()[1]
    server_class = _beaten_to_its_first_port(RedisServer, lambda config: config.port, squatters)
    server = server_class(RedisConfig(data_dir=tmp_path / "redis", port=given))
    with pytest.raises(PortInUse, match=f"could not bind one of its ports \\[{given}\\]"):
        server.__enter__()
    assert server.config.port == given and server.running_pid() is None


def test_seaweed_that_lost_an_internal_port_starts_on_fresh_ones(tmp_path: Path, squatters) -> None:
    # weed itself would move a taken gRPC listener elsewhere, silently to its clients
    server_class = _beaten_to_its_first_port(SeaweedServer, lambda config: config.ports.filer_grpc, squatters)
    config = SeaweedConfig(data_dir=tmp_path / "seaweed", s3_port=ANY_PORT, access_key="poolq-race",
                           secret_key="poolq-race-secret", bucket="poolq-race")
    with server_class(config) as server:
        lost = squatters.sockets[0].getsockname()[1]
        assert lost not in server.config.all_ports()
        assert listening_ports(server.running_pid()) == set(server.config.all_ports())
        assert server.endpoint_url == f"http://127.0.0.1:{server.config.s3_port}"


def test_a_server_on_port_zero_is_found_on_the_port_it_got(tmp_path: Path) -> None:
    code = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); time.sleep(60)"
    pid = spawn([sys.executable, "-c", code], log_path=tmp_path / "listener.log", pid_path=None)
    try:
        port = wait_listening_port(pid, 30, "the listener", log_path=tmp_path / "listener.log")
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        stop_pid(pid, expect_in_cmdline="time.sleep(60)", timeout=5)


def test_the_stack_state_follows_the_ports_services_got() -> None:
    state = StackState(state_dir="x", api_url="", s3_endpoint="", bucket="b", redis_url="", access_key_id="k",
                       secret_access_key="s", ports={})
    for name in ("redis", "s3", "api"):
        state.use_port(name, 0)
    state.use_port("redis", 41001)
    state.use_port("s3", 41002)
    state.use_port("api", 41003)
    assert state.ports == {"redis": 41001, "s3": 41002, "api": 41003}
    assert (state.redis_url, state.s3_endpoint, state.api_url) == (
        "redis://127.0.0.1:41001/0", "http://127.0.0.1:41002", "http://127.0.0.1:41003")
