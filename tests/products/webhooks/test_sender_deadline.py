"""The real sender's whole-request deadline: a receiver that trickles its answer a byte at a time (each
byte well inside the read timeout) holds a delivery connect + read timeouts at most."""
import ipaddress
import socket
import threading
import time

import pytest

from poolq.products.webhooks.sender import HttpSender
from poolq.products.webhooks.webhook_url import parse_webhook_url

TRICKLE = b"HTTP/1.1 200 OK\r\nx-slow: " + b"a" * 40 + b"\r\ncontent-length: 2\r\n\r\nok"


def _serve_one(answer) -> tuple[int, threading.Event]:
    """A loopback server answering one connection with ``answer(connection)``; the event: it finished."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def run() -> None:
        connection, _ = listener.accept()
        with connection, listener:
            connection.recv(65536)
            try:
                answer(connection)
            except OSError:  # the sender hung up
                pass
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1], done


def _trickle(connection) -> None:
    for byte in TRICKLE:  # ~70 bytes, 0.1 s apart: 7 s in all, never 0.5 s without one
        connection.sendall(bytes([byte]))
        time.sleep(0.1)


def _post(port: int, sender: HttpSender):
    url = parse_webhook_url(f"http://127.0.0.1:{port}/hook")
    return sender.post(url, ipaddress.ip_address("127.0.0.1"), {}, b"{}")


def test_a_receiver_trickling_its_answer_is_cut_off_at_the_deadline_and_one_in_time_is_not():
    sender = HttpSender(connect_timeout_s=0.5, read_timeout_s=1.0, max_response_bytes=1024)
    port, _ = _serve_one(_trickle)
    started = time.monotonic()
    # cut short, its head would read as "HTTP/1.1 200 OK": no answer came, and it is said so
    with pytest.raises(TimeoutError, match=r"no whole answer within 1\.5 s"):
        _post(port, sender)
    assert time.monotonic() - started < 3  # not the trickle's 7 s

    def slow_but_in_time(connection) -> None:
        time.sleep(0.6)  # past the connect timeout, within connect + read
        connection.sendall(TRICKLE)

    port, _ = _serve_one(slow_but_in_time)
    answer = _post(port, sender)
    assert (answer.status, answer.excerpt) == (200, "ok")
