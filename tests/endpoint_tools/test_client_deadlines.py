"""The shared HTTP client (endpoint_tools/openai_client.py) ends every request at its deadline,
in-process, behind every way a body can be delimited (issue 28, item 3).

http.client hands the socket of a connection that will close (`Connection: close`, HTTP/1.0, a
close-delimited or closing chunked body) to the response; a watchdog that shut the connection's
socket found None there and a byte-a-second drip outlived the deadline. Each case here is a real
server on 127.0.0.1 (tests/support/fuzz/fault_server.py), and the client must raise one
EndpointError naming the deadline within the request timeout plus SLACK_SECONDS.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from endpoint_tools.openai_client import Client, EndpointError
from tests.support.fuzz.fault_server import FaultServer

TIMEOUT = 1.5
# A loaded 2-core machine may schedule the watchdog's thread late; the bound is still far below
# the drip's length (forever).
SLACK_SECONDS = 5
FRAMINGS = (
    "drip_body",
    "drip_close",
    "drip_http10",
    "drip_chunked",
    "drip_chunked_close",
    "stall_after_headers",
    "stall_after_headers_close",
    "stall_before_headers",
)


def _ends_at_the_deadline(call) -> str:
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        call()
    seconds = time.monotonic() - started
    assert seconds < TIMEOUT + SLACK_SECONDS, f"{seconds:.1f} s for a {TIMEOUT} s deadline"
    message = str(caught.value)
    assert "\n" not in message and "(deadline)" in message, message
    return message


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_plain_request_ends_at_its_deadline_behind_every_framing(server: FaultServer, framing):
    server.set({"models": framing})
    client = Client(server.url, timeout=TIMEOUT)
    _ends_at_the_deadline(lambda: client.get("/v1/models"))


@pytest.mark.parametrize("framing", [*FRAMINGS, "drip_events"])
def test_a_stream_ends_at_its_deadline_behind_every_framing(server: FaultServer, framing):
    server.set({"chat_stream": framing})
    client = Client(server.url, timeout=TIMEOUT)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    _ends_at_the_deadline(lambda: list(client.stream("/v1/chat/completions", body)))


def test_the_run_deadline_cuts_a_drip_before_the_request_timeout(server: FaultServer):
    server.set({"models": "drip_close"})
    client = Client(server.url, timeout=60, deadline=time.monotonic() + TIMEOUT)
    _ends_at_the_deadline(lambda: client.get("/v1/models"))


def test_an_honest_close_delimited_stream_is_read_to_its_end(server: FaultServer):
    # The fault server's streams are `Connection: close` without a length: the deadline machinery
    # must not cut what ends by itself.
    server.set({})
    client = Client(server.url, timeout=10)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4}
    events = list(client.stream("/v1/chat/completions", body))
    assert events and events[-1].done


@pytest.fixture
def tls_handshake_drip():
    """A TCP server that reads the ClientHello and answers with the header of a 16 KiB TLS
    handshake record, then one byte a second: the handshake never completes, no read times out."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"\x16\x03\x03\x40\x00")
                    while not stop.wait(1.0):
                        conn.sendall(b"\x02")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    listener.close()


def test_a_tls_handshake_that_drips_ends_at_the_deadline(tls_handshake_drip):
    # Bounded by the ssl module's one deadline for the whole handshake (see _HTTPSConnection); this
    # keeps it so if the connection's set-up changes.
    client = Client(tls_handshake_drip, timeout=TIMEOUT)
    _ends_at_the_deadline(lambda: client.get("/health"))
