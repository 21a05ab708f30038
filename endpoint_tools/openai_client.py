"""A small stdlib HTTP client for an OpenAI-compatible server (vLLM).

Standard library only, so the smoke and load commands run from the Pulumi program's venv, a CI
runner or a bare in-cluster Job without extra packages. One connection per call: the load test
runs one request per thread, and a fresh connection per request is what independent clients do.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterator


class EndpointError(Exception):
    """The endpoint could not be reached or answered unusably; the message is one line for humans."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise EndpointError(f"expected JSON, got: {self.text()[:200]!r}") from exc


@dataclass
class StreamEvent:
    """One `data:` line of a server-sent-event stream with the time it arrived."""

    at: float
    data: str

    @property
    def done(self) -> bool:
        return self.data == "[DONE]"

    def json(self) -> Any:
        return json.loads(self.data)


class Client:
    """Talks to one base URL (`http(s)://host[:port][/prefix]`), optionally with a bearer key."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 60.0):
        parsed, port = _split_base_url(base_url)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = port
        # A trailing /v1 is a common way to write an OpenAI base URL; paths below add it themselves.
        prefix = parsed.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[: -len("/v1")]
        self.prefix = prefix
        self.api_key = api_key
        self.timeout = timeout
        self.base_url = f"{self.scheme}://{parsed.netloc}{self.prefix}"

    # -- plumbing -------------------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _send(self, method: str, path: str, body: Any, timeout: float) -> http.client.HTTPResponse:
        payload = None if body is None else json.dumps(body).encode()
        conn = self._connection(timeout)
        try:
            conn.request(method, self.prefix + path, body=payload, headers=self._headers(payload is not None))
            return conn.getresponse()
        except (ConnectionError, socket.timeout, socket.gaierror, OSError, http.client.HTTPException) as exc:
            conn.close()
            raise EndpointError(f"{method} {self.base_url}{path} failed: {_describe(exc)}") from exc

    def request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Response:
        resp = self._send(method, path, body, timeout or self.timeout)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise EndpointError(f"{method} {self.base_url}{path}: reading the answer failed: {_describe(exc)}") from exc
        finally:
            resp.close()
        return Response(resp.status, data)

    def get(self, path: str, timeout: float | None = None) -> Response:
        return self.request("GET", path, None, timeout)

    def post(self, path: str, body: Any, timeout: float | None = None) -> Response:
        return self.request("POST", path, body, timeout)

    def stream(self, path: str, body: Any, timeout: float | None = None) -> Iterator[StreamEvent]:
        """POST and yield each SSE `data:` event as it arrives (timestamped on arrival).

        A non-2xx answer raises EndpointError with the server's message, so callers see why.
        """
        resp = self._send("POST", path, body, timeout or self.timeout)
        try:
            if resp.status >= 300:
                text = resp.read().decode("utf-8", errors="replace")
                raise EndpointError(f"POST {path} answered HTTP {resp.status}: {_short(text)}")
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue  # comments, event names, blank separators
                yield StreamEvent(time.perf_counter(), line[5:].strip().decode("utf-8", errors="replace"))
        except (OSError, http.client.HTTPException) as exc:
            raise EndpointError(f"POST {self.base_url}{path}: stream broke: {_describe(exc)}") from exc
        finally:
            resp.close()

    # -- vLLM helpers -----------------------------------------------------------------------------

    def tokenize(self, model: str, *, prompt: str | None = None, messages: list[dict] | None = None,
                 add_special_tokens: bool = True) -> list[int]:
        """Token ids exactly as the server counts them (vLLM's /tokenize).

        With `messages`, the server applies the model's chat template and the generation prompt,
        which is what a chat completion's prompt length is.
        """
        body: dict[str, Any] = {"model": model, "add_special_tokens": add_special_tokens}
        if messages is not None:
            body["messages"] = messages
            body["add_generation_prompt"] = True
        else:
            body["prompt"] = prompt
        resp = self.post("/tokenize", body)
        if resp.status != 200:
            raise EndpointError(f"POST /tokenize answered HTTP {resp.status}: {_short(resp.text())}")
        data = resp.json()
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise EndpointError(f"POST /tokenize answer has no token list: {_short(resp.text())}")
        return tokens


def _split_base_url(base_url: str) -> tuple[urllib.parse.SplitResult, int]:
    """The parsed URL and its port; every problem is a ValueError naming --base-url and the value.

    urlsplit and .port raise bare ValueErrors ("Invalid IPv6 URL", "Port out of range 0-65535")
    that would not tell a user which flag is wrong, so they are reworded here.
    """
    example = "use e.g. http://127.0.0.1:8000 or http://[::1]:8000"
    try:
        parsed = urllib.parse.urlsplit(base_url)
        port = parsed.port
    except ValueError as exc:
        hint = " (an IPv6 address goes in brackets)" if base_url.count(":") > 2 and "[" not in base_url else ""
        raise ValueError(f"--base-url {base_url}: {exc}{hint}; {example}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--base-url {base_url}: not an http(s) URL with a host; {example}")
    if port == 0:
        # Port 0 means "any port" to the OS; as a server address it is a typo, not the default.
        raise ValueError(f"--base-url {base_url}: port 0 is not a server port; {example}")
    return parsed, port or (443 if parsed.scheme == "https" else 80)


def error_message(resp: Response) -> str:
    """The server's error message from an OpenAI-style error body, else the raw text, one line."""
    try:
        data = json.loads(resp.body)
        if isinstance(data, dict):
            err = data.get("error", data)
            if isinstance(err, dict) and err.get("message"):
                return _short(str(err["message"]))
            if isinstance(data.get("message"), str):
                return _short(data["message"])
    except ValueError:
        pass
    return _short(resp.text())


def _short(text: str, limit: int = 240) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running and the port right?)"
    if isinstance(exc, socket.gaierror):
        return f"host name not resolved ({exc.strerror or exc})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
