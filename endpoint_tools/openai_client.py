"""A small stdlib HTTP client for an OpenAI-compatible server (vLLM), bounded against a bad server.

Standard library only, so the smoke and load commands run from the Pulumi program's venv, a CI
runner or a bare in-cluster Job without extra packages. One connection per call: the load test
runs one request per thread, and a fresh connection per request is what independent clients do.

The server is not trusted to behave. Every request has a deadline for the WHOLE request (connect,
send, headers, body or stream), not only per read: a watchdog shuts the request's own socket down
when it passes (also after http.client has handed that socket to the response, as it does for
`Connection: close`, HTTP/1.0 and close-delimited or chunked bodies), and each read is given at
most what is left of the deadline, so a server that drips one byte a second, streams forever or
stalls after its headers ends the request in time. A run may add its own deadline
(`Client(deadline=...)`) that no request outlives. Bodies, stream events, the number of events
and the bytes of a stream are capped, JSON is parsed with common.untrusted's depth and size
limits, and everything that goes wrong is an EndpointError with one printable line.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from common.untrusted import InputLimitError, loads_json

# What one answer may hold. vLLM's /metrics is ~100 KB and a /tokenize answer of 1M tokens ~8 MB.
MAX_BODY_BYTES = 32 * 1024 * 1024
# One server-sent event (a chunk carries a few tokens; an error event a message).
MAX_EVENT_BYTES = 1024 * 1024
# Events and bytes of one stream: a completion of 100,000 chunks is far beyond any max_tokens the
# tools ask for, and a stream that never ends is cut at its deadline or at these caps.
MAX_STREAM_EVENTS = 100_000
MAX_STREAM_BYTES = 64 * 1024 * 1024
# Token ids a /tokenize answer may carry (vocabularies are below 2^24; 2^32 leaves room).
MAX_TOKEN_ID = 2**32


class EndpointError(Exception):
    """The endpoint could not be reached or answered unusably; the message is one line for humans."""


class MalformedAnswer(EndpointError):
    """The server answered, but not in the shape the API promises (a lie, not an absence)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _short(text: str, limit: int = 240) -> str:
    """One printable line: whitespace runs folded, other control characters escaped, cut at `limit`."""
    one_line = " ".join(str(text)[: limit * 4].split())
    one_line = _CONTROL.sub(lambda m: repr(m.group())[1:-1], one_line)
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def parse_json(data: bytes | str, what: str) -> Any:
    """JSON from the server within the shared limits, or MalformedAnswer naming `what`."""
    try:
        return loads_json(data, what, max_bytes=MAX_BODY_BYTES)
    except InputLimitError as exc:
        raise MalformedAnswer(_short(str(exc))) from None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    path: str = ""

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return parse_json(self.body, self.path or "answer")


@dataclass
class StreamEvent:
    """One `data:` line of a server-sent-event stream with the time it arrived."""

    at: float
    data: str

    @property
    def done(self) -> bool:
        return self.data == "[DONE]"

    def json(self) -> Any:
        return parse_json(self.data, "stream event")


def stream_event_error(data: object) -> str | None:
    """Why a parsed stream event means the request failed, or None for an ordinary chunk.

    vLLM sends `data: {"error": {"message": ..., "code": ...}}` when generation fails after the
    stream started; older servers send the bare ErrorResponse (`{"object": "error", "message": ...}`).
    Anything that is not a JSON object is not an OpenAI stream chunk at all.
    """
    if not isinstance(data, dict):
        return f"stream event is not a JSON object: {_short(repr(data), 120)}"
    if "error" in data:
        return "stream error: " + _error_text(data["error"])
    if data.get("object") == "error":
        return "stream error: " + _error_text(data)
    return None


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        message = error.get("message") or repr(error)
        code = error.get("code")
        text = f"{message} (code {code})" if code is not None else str(message)
        return _short(text, 200)
    return _short(str(error), 200)


class _Watchdog:
    """Ends a request at its deadline, whatever it is doing, on the socket the response reads from.

    http.client gives the socket of a connection that will close (`Connection: close`, an HTTP/1.0
    status line, a body delimited by the close) to the response and sets the connection's `sock` to
    None (CPython v3.11.7 Lib/http/client.py, HTTPConnection.getresponse: "this effectively passes
    the connection to the response"), so a watchdog that looked at `conn.sock` found nothing to shut
    and a server dripping a byte a second kept the request alive past every deadline. This one
    holds the socket object itself from the moment it is connected (`watch`), and also sets a
    per-read timeout of what is left before each read (`before_read`), so neither a drip nor a
    stall outlives the deadline by more than a moment.
    """

    def __init__(self, seconds: float):
        self.fired = False
        self.ends = time.monotonic() + max(seconds, 0.0)
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        """The request's socket, the one the deadline shuts (the response reads from the same one)."""
        with self._lock:
            self._sock = sock
            fired = self.fired
        if fired:
            _shut(sock)

    def before_read(self) -> None:
        """Bound the next read by what is left of the deadline; past it, end the request now."""
        left = self.ends - time.monotonic()
        if left <= 0:
            self.fired = True
            raise TimeoutError("deadline passed")
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(left)

    def explains(self, exc: BaseException) -> bool:
        """Whether `exc` is the deadline at work: the watchdog fired, or a read timed out (every
        socket timeout of a request is at most what was left of its deadline)."""
        return self.fired or isinstance(exc, TimeoutError)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sock = self._sock
        if sock is not None:
            _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for a TLS socket (ssl.SSLSocket.shutdown would drop its TLS
    # state under a read running in another thread): the blocked read returns at once. A socket
    # already closed has no descriptor any more (fileno -1), so this cannot reach another connection.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watched:
    """Hands the connection's socket to a watchdog as soon as it exists (a mixin before the
    http.client connection class)."""

    sock: Any

    def __init__(self, *args: Any, watchdog: _Watchdog, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.watchdog = watchdog

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        assert self.sock is not None
        self.watchdog.watch(self.sock)


class _HTTPConnection(_Watched, http.client.HTTPConnection):
    """An HTTP connection whose socket the watchdog can shut down."""


class _HTTPSConnection(_Watched, http.client.HTTPSConnection):
    """As _HTTPConnection over TLS, the TLS socket watched once its handshake is done. The handshake
    itself is bounded as one call: CPython's ssl module computes one deadline from the socket's
    timeout when do_handshake starts and waits for every read within it (v3.11.7 Modules/_ssl.c,
    _ssl__SSLSocket_do_handshake_impl), and that timeout is the request's seconds."""


class Client:
    """Talks to one base URL (`http(s)://host[:port][/prefix]`), optionally with a bearer key.

    `timeout` bounds each request from start to end (seconds); `deadline` (a time.monotonic()
    value) bounds all of them together: no request starts after it or runs past it.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 60.0, deadline: float | None = None):
        parsed, port = _split_base_url(base_url)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
        self.scheme = parsed.scheme
        assert parsed.hostname  # _split_base_url refuses a URL without a host
        self.host: str = parsed.hostname
        self.port = port
        # A trailing /v1 is a common way to write an OpenAI base URL; paths below add it themselves.
        prefix = parsed.path.rstrip("/")
        prefix = prefix.removesuffix("/v1")
        self.prefix = prefix
        self.api_key = api_key
        self.timeout = timeout
        self.deadline = deadline
        self.base_url = f"{self.scheme}://{parsed.netloc}{self.prefix}"

    # -- plumbing -------------------------------------------------------------------------------

    def _seconds_left(self, timeout: float | None) -> float:
        seconds = timeout or self.timeout
        if self.deadline is not None:
            seconds = min(seconds, self.deadline - time.monotonic())
        return seconds

    def _connection(self, timeout: float, watchdog: _Watchdog) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return _HTTPSConnection(
                self.host, self.port, timeout=timeout, context=ssl.create_default_context(), watchdog=watchdog
            )
        return _HTTPConnection(self.host, self.port, timeout=timeout, watchdog=watchdog)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _open(self, method: str, path: str, body: Any, timeout: float | None):
        """Send the request; (connection, response, watchdog) with the deadline already running."""
        seconds = self._seconds_left(timeout)
        where = f"{method} {self.base_url}{path}"
        if seconds <= 0:
            raise EndpointError(f"{where}: not sent, the run's deadline has passed")
        payload = None if body is None else json.dumps(body).encode()
        watchdog = _Watchdog(seconds)
        conn = self._connection(seconds, watchdog)
        try:
            conn.request(method, self.prefix + path, body=payload, headers=self._headers(payload is not None))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            watchdog.cancel()
            conn.close()
            if watchdog.explains(exc):
                raise EndpointError(f"{where}: no answer within {seconds:.1f} s (deadline)") from None
            raise EndpointError(f"{where} failed: {_describe(exc)}") from None
        return conn, resp, watchdog, seconds

    def request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Response:
        conn, resp, watchdog, seconds = self._open(method, path, body, timeout)
        where = f"{method} {self.base_url}{path}"
        try:
            declared = resp.getheader("Content-Length")
            if declared and declared.strip().isdigit() and int(declared) > MAX_BODY_BYTES:
                raise EndpointError(
                    f"{where}: answer of {int(declared):,} bytes, more than the {MAX_BODY_BYTES:,} this tool reads"
                )
            chunks, size = [], 0
            while True:
                watchdog.before_read()
                chunk = resp.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise EndpointError(f"{where}: answer larger than the {MAX_BODY_BYTES:,} bytes this tool reads")
                chunks.append(chunk)
            if watchdog.fired:
                raise EndpointError(f"{where}: answer not complete within {seconds:.1f} s (deadline)")
            return Response(resp.status, b"".join(chunks), path)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if watchdog.explains(exc):
                raise EndpointError(f"{where}: answer not complete within {seconds:.1f} s (deadline)") from None
            raise EndpointError(f"{where}: reading the answer failed: {_describe(exc)}") from None
        finally:
            watchdog.cancel()
            resp.close()
            conn.close()

    def get(self, path: str, timeout: float | None = None) -> Response:
        return self.request("GET", path, None, timeout)

    def post(self, path: str, body: Any, timeout: float | None = None) -> Response:
        return self.request("POST", path, body, timeout)

    def stream(self, path: str, body: Any, timeout: float | None = None) -> Iterator[StreamEvent]:
        """POST and yield each SSE `data:` event as it arrives (timestamped on arrival).

        A non-2xx answer raises EndpointError with the server's message, so callers see why. The
        stream ends at the server's end, at the deadline (EndpointError), or at a cap (EndpointError).
        """
        conn, resp, watchdog, seconds = self._open("POST", path, body, timeout)
        where = f"POST {self.base_url}{path}"
        try:
            if resp.status >= 300:
                watchdog.before_read()
                text = resp.read(64 * 1024).decode("utf-8", errors="replace")
                raise EndpointError(f"POST {path} answered HTTP {resp.status}: {error_message_text(text)}")
            events, total = 0, 0
            while True:
                watchdog.before_read()
                line = resp.readline(MAX_EVENT_BYTES + 1)
                if watchdog.fired:
                    raise EndpointError(f"{where}: stream not finished within {seconds:.1f} s (deadline)")
                if not line:
                    break
                total += len(line)
                if len(line) > MAX_EVENT_BYTES:
                    raise EndpointError(f"{where}: a stream line is longer than {MAX_EVENT_BYTES:,} bytes")
                if total > MAX_STREAM_BYTES:
                    raise EndpointError(f"{where}: stream longer than {MAX_STREAM_BYTES:,} bytes")
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue  # comments, event names, blank separators
                events += 1
                if events > MAX_STREAM_EVENTS:
                    raise EndpointError(f"{where}: stream of more than {MAX_STREAM_EVENTS:,} events")
                yield StreamEvent(time.perf_counter(), line[5:].strip().decode("utf-8", errors="replace"))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if watchdog.explains(exc):
                raise EndpointError(f"{where}: stream not finished within {seconds:.1f} s (deadline)") from None
            raise EndpointError(f"{where}: stream broke: {_describe(exc)}") from None
        finally:
            watchdog.cancel()
            resp.close()
            conn.close()

    # -- vLLM helpers -----------------------------------------------------------------------------

    def tokenize_strs(self, model: str, messages: list[dict]) -> tuple[list[int], list[str]]:
        """The templated chat's token ids and their strings (/tokenize with return_token_strs)."""
        body = {"model": model, "messages": messages, "add_generation_prompt": True, "return_token_strs": True}
        resp = self.post("/tokenize", body)
        if resp.status != 200:
            raise EndpointError(f"POST /tokenize answered HTTP {resp.status}: {error_message(resp)}")
        data = resp.json()
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < MAX_TOKEN_ID for t in tokens
        ):
            raise MalformedAnswer("POST /tokenize answer has no list of token ids")
        return tokens, token_strings(data, len(tokens))

    def tokenize(
        self,
        model: str,
        *,
        prompt: str | None = None,
        messages: list[dict] | None = None,
        add_special_tokens: bool = True,
    ) -> list[int]:
        """Token ids exactly as the server counts them (vLLM's /tokenize).

        With `messages`, the server applies the model's chat template and the generation prompt,
        which is what a chat completion's prompt length is. A non-200 answer is an EndpointError (the
        server has no /tokenize); an answer that is not a list of token ids is a MalformedAnswer.
        """
        body: dict[str, Any] = {"model": model, "add_special_tokens": add_special_tokens}
        if messages is not None:
            body["messages"] = messages
            body["add_generation_prompt"] = True
        else:
            body["prompt"] = prompt
        resp = self.post("/tokenize", body)
        if resp.status != 200:
            raise EndpointError(f"POST /tokenize answered HTTP {resp.status}: {error_message(resp)}")
        data = resp.json()
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise MalformedAnswer(f"POST /tokenize answer has no token list: {_short(resp.text(), 120)}")
        if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < MAX_TOKEN_ID for t in tokens):
            raise MalformedAnswer("POST /tokenize answer lists something other than token ids (whole numbers >= 0)")
        return tokens


# A token's text is a few bytes; longer is not a token.
MAX_TOKEN_STR_CHARS = 1024


def token_strings(data: Any, count: int) -> list[str]:
    """The `token_strs` of a /tokenize answer (return_token_strs): one short string per token id."""
    strs = data.get("token_strs") if isinstance(data, dict) else None
    if not isinstance(strs, list) or len(strs) != count:
        raise MalformedAnswer(
            "POST /tokenize answer has no token_strs list as long as its tokens "
            "(return_token_strs needs vLLM 0.6 or later)"
        )
    if not all(isinstance(s, str) and len(s) <= MAX_TOKEN_STR_CHARS for s in strs):
        raise MalformedAnswer("POST /tokenize answer's token_strs holds something other than short strings")
    return strs


def whole_number(value: Any) -> int | None:
    """An integer from a JSON answer (true/false are not numbers), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _split_base_url(base_url: str) -> tuple[urllib.parse.SplitResult, int]:
    """The parsed URL and its port; every problem is a ValueError naming --base-url and the value.

    urlsplit and .port raise bare ValueErrors ("Invalid IPv6 URL", "Port out of range 0-65535")
    that would not tell a user which flag is wrong, so they are reworded here.
    """
    example = "use e.g. http://127.0.0.1:8000 or http://[::1]:8000"
    shown = _short(base_url, 120)
    if _CONTROL.search(base_url) or " " in base_url:
        raise ValueError(f"--base-url {shown}: spaces or control characters; {example}")
    try:
        parsed = urllib.parse.urlsplit(base_url)
        port = parsed.port
    except ValueError as exc:
        hint = " (an IPv6 address goes in brackets)" if base_url.count(":") > 2 and "[" not in base_url else ""
        raise ValueError(f"--base-url {shown}: {exc}{hint}; {example}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--base-url {shown}: not an http(s) URL with a host; {example}")
    if parsed.username is not None or parsed.password is not None:
        raise ValueError("--base-url: carries credentials (user:password@); pass the API key with --api-key-env")
    if port == 0:
        # Port 0 means "any port" to the OS; as a server address it is a typo, not the default.
        raise ValueError(f"--base-url {shown}: port 0 is not a server port; {example}")
    return parsed, port or (443 if parsed.scheme == "https" else 80)


def error_message_text(text: str) -> str:
    """The message of an OpenAI-style error body given as text, else the text itself, one line."""
    try:
        data = loads_json(text, "error body", max_bytes=MAX_BODY_BYTES)
    except InputLimitError:
        return _short(text)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return _short(str(err["message"]))
        if isinstance(data.get("message"), str):
            return _short(data["message"])
    return _short(text)


def error_message(resp: Response) -> str:
    """The server's error message from an OpenAI-style error body, else the raw text, one line."""
    return error_message_text(resp.text()[: 256 * 1024])


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running and the port right?)"
    if isinstance(exc, socket.gaierror):
        return f"host name not resolved ({exc.strerror or exc})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    return _short(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 200)
