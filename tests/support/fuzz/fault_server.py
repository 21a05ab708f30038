"""An OpenAI-compatible server on 127.0.0.1 that misbehaves on purpose, for the smoke check and the
load sweep.

With every endpoint `ok` it is a tiny, honest vLLM stand-in: words are tokens (so the smoke check's
exact prompt sizing works), the context limit is enforced the way vLLM 0.32 does (a prompt over the
limit is a 400, max_tokens is clamped to what fits), streams end with `data: [DONE]`, and /metrics
offers every series the stack's alerts need. Each endpoint can instead be given a fault from
`BEHAVIOURS`: drip a byte at a time, stall, stream forever, announce a 3 GB body, lie, send malformed
JSON, the wrong content type, an error event, close the connection.

`FaultServer` runs in a thread of the test process; `scenario` maps an endpoint to its behaviour
and can be changed between cases.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common.engine_metrics import CACHE_CONFIG_INFO, REQUIRED_METRICS

MODEL = "fuzz-model"
MAX_MODEL_LEN = 256
# The KV-cache tokens the honest server reports (the smoke runs expect exactly this).
KV_TOKENS = 4096
TEMPLATE_TOKENS = 5  # what the "chat template" adds to every prompt
TEMPLATE_TOKEN = "<|t|>"  # the token it adds, as /tokenize's token_strs name it
# A drip's pace: one byte a second, each arriving well within any per-read timeout a tool sets.
DRIP_SECONDS = 1.0
# What a drip sends, a byte at a time: the start of a plausible answer, then spaces.
DRIP_PREFIX = b'{"data": ['

# Endpoints as the tools use them: (method, path, streamed?).
ENDPOINTS = ("health", "models", "chat", "chat_stream", "completions_stream", "tokenize", "metrics")

# Faults that apply to any endpoint; a tool that reads the endpoint must fail its check cleanly.
GENERIC_FAULTS = (
    "status_500",
    "status_404_html",
    "close",
    "stall_before_headers",
    "stall_after_headers",
    "drip_body",
    "drip_headers",
    # The same drip behind every way HTTP/1.1 delimits a body (issue 28): `Connection: close` with no
    # length (read until close), an HTTP/1.0 status line, chunked (kept alive and closed), and headers
    # announcing a close-delimited body and then nothing. http.client hands the socket of a closing
    # connection to the response, so a deadline must reach the response's own socket.
    "drip_close",
    "drip_http10",
    "drip_chunked",
    "drip_chunked_close",
    "stall_after_headers_close",
    "huge_body",
    "huge_declared",
    "not_json",
    "deep_json",
    "wrong_content_type",
    "empty_200",
    "json_null",
    "json_list",
    "nan_json",
    "long_line",
)
# Faults specific to one endpoint: lies in the shape of the answer.
SPECIFIC_FAULTS = {
    "models": (
        "data_null",
        "data_not_list",
        "model_missing",
        "max_model_len_absurd",
        "max_model_len_string",
        "max_model_len_bool",
        "max_model_len_tiny",
    ),
    "chat": (
        "usage_list",
        "choices_empty",
        "content_number",
        "finish_missing",
        "usage_completion_bool",
        "message_string",
    ),
    "chat_stream": (
        "endless",
        "drip_events",
        "error_event",
        "no_done",
        "odd_events",
        "event_list",
        "event_huge",
        "choices_string",
        "delta_number",
        "many_tiny_events",
    ),
    "completions_stream": (
        "endless",
        "drip_events",
        "error_event",
        "no_done",
        "odd_events",
        "event_list",
        "event_huge",
        "choices_string",
        "usage_string",
        "many_tiny_events",
    ),
    "tokenize": (
        "tokens_empty",
        "tokens_null",
        "tokens_strings",
        "tokens_negative",
        "tokens_constant",
        "tokens_huge_ids",
        "token_strs_missing",
        "token_strs_huge",
    ),
    "metrics": (
        "metrics_missing",
        "metrics_binary",
        "kv_missing",
        "kv_low",
        "kv_garbage",
        "kv_many",
        "kv_long_line",
        "kv_zero",
        "kv_digits",
    ),
}


def behaviours(endpoint: str) -> tuple[str, ...]:
    return ("ok", *GENERIC_FAULTS, *SPECIFIC_FAULTS.get(endpoint, ()))


def _words(text: str) -> list[str]:
    return text.split()


def count_prompt(body: dict) -> int:
    if "messages" in body:
        content = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
        return len(_words(content)) + TEMPLATE_TOKENS
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return len(prompt)
    return len(_words(str(prompt or "")))


def _kv_info(tokens: object = None, extra: str = "") -> str:
    tokens = KV_TOKENS if tokens is None else tokens
    return (
        f'{CACHE_CONFIG_INFO}{{block_size="16",engine="0",kv_cache_size_tokens="{tokens}",'
        f'num_gpu_blocks="{KV_TOKENS // 16}"{extra}}} 1.0'
    )


def _metrics_text(behaviour: str = "ok") -> str:
    lines = []
    for name in REQUIRED_METRICS:
        lines.append(f"# TYPE {name} gauge")
        lines.append(f'{name}{{model_name="{MODEL}"}} 0.0')
    # The KV-cache capacity as vLLM 0.32 states it, and its lies (the required series stay honest,
    # so only the kv check can see these).
    lines.append(f"# TYPE {CACHE_CONFIG_INFO} gauge")
    kv = {
        "ok": [_kv_info()],
        "kv_missing": [],
        "kv_low": [_kv_info(KV_TOKENS // 2)],
        "kv_garbage": [f'{CACHE_CONFIG_INFO}{{block_size=16,kv_cache_size_tokens="lots"}} 1.0'],
        "kv_many": [_kv_info()] * 10_000,
        "kv_long_line": [_kv_info(extra=',x="' + "y" * 200_000 + '"')],
        "kv_zero": [_kv_info(0)],
        "kv_digits": [_kv_info("9" * 5000)],
    }
    lines += kv.get(behaviour, kv["ok"])
    return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultServer

    def log_message(self, *args) -> None:  # quiet
        pass

    # -- routing ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        endpoint = {"/health": "health", "/v1/models": "models", "/metrics": "metrics"}.get(self.path.split("?")[0])
        self._serve(endpoint, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        stream = bool(body.get("stream")) if isinstance(body, dict) else False
        endpoint = {
            "/v1/chat/completions": "chat_stream" if stream else "chat",
            "/v1/completions": "completions_stream" if stream else "completions",
            "/tokenize": "tokenize",
        }.get(path)
        self._serve(endpoint, body if isinstance(body, dict) else {})

    def _serve(self, endpoint: str | None, body: dict) -> None:
        # The case this request belongs to: set() replaces the event for the next case, so a drip or
        # stall of this one must watch its own.
        self._stopping = self.server.stopping
        self.server.hits.append(endpoint)
        if endpoint is None:
            return self._json(404, {"error": {"message": "not found", "code": 404}})
        behaviour = self.server.scenario.get(endpoint, "ok")
        try:
            if behaviour == "ok" or behaviour in SPECIFIC_FAULTS.get(endpoint, ()):
                getattr(self, f"_ok_{endpoint}")(body, behaviour)
            else:
                self._generic(behaviour)
        except (TimeoutError, BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up, as it should

    # -- plumbing --------------------------------------------------------------------------------

    def _send(
        self, status: int, data: bytes, content_type: str = "application/json", length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, value) -> None:
        self._send(status, json.dumps(value).encode())

    def _alive(self) -> bool:
        return not self._stopping.is_set()

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _stream_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, payload) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    # -- faults any endpoint can have ------------------------------------------------------------

    def _generic(self, behaviour: str) -> None:
        if behaviour == "status_500":
            return self._json(500, {"error": {"message": "Internal Server Error", "code": 500}})
        if behaviour == "status_404_html":
            return self._send(404, b"<html><body>no\x1b[31m such page</body></html>", "text/html")
        if behaviour == "close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if behaviour == "stall_before_headers":
            while self._alive():
                self._sleep(0.5)
            return None
        if behaviour == "stall_after_headers":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            while self._alive():
                self._sleep(0.5)
            return None
        if behaviour == "drip_body":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while self._alive():
                self.wfile.write(b" ")
                self.wfile.flush()
                self._sleep(0.3)
            return None
        if behaviour in ("drip_close", "drip_http10", "drip_chunked", "drip_chunked_close"):
            return self._drip(behaviour)
        if behaviour == "stall_after_headers_close":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            while self._alive():
                self._sleep(0.5)
            return None
        if behaviour == "drip_headers":
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 60000:
                if not self._alive():
                    return None
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                self._sleep(0.3)
            return None
        if behaviour == "huge_body":
            # 3 GB announced and sent as fast as the client reads it.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(3 * 1024**3))
            self.end_headers()
            chunk = b"[" * 65536
            for _ in range(3 * 1024**3 // 65536):
                if not self._alive():
                    return None
                self.wfile.write(chunk)
            return None
        if behaviour == "huge_declared":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(3 * 1024**3))
            self.end_headers()
            self.wfile.write(b'{"data": ')
            self.close_connection = True
            return None
        if behaviour == "not_json":
            return self._send(200, b"{this is not json", "application/json")
        if behaviour == "deep_json":
            return self._send(200, b"[" * 100000 + b"]" * 100000)
        if behaviour == "wrong_content_type":
            return self._send(200, b"\x89PNG\r\n\x1a\n\x00\x00binary", "image/png")
        if behaviour == "empty_200":
            return self._send(200, b"")
        if behaviour == "json_null":
            return self._send(200, b"null")
        if behaviour == "json_list":
            return self._send(200, b"[1, 2, 3]")
        if behaviour == "nan_json":
            return self._send(200, b'{"data": NaN, "tokens": [NaN], "choices": Infinity}')
        if behaviour == "long_line":
            return self._send(200, b'{"x": "' + b"y" * (4 * 1024 * 1024) + b'"}')
        raise AssertionError(f"unknown behaviour {behaviour}")

    def _drip(self, behaviour: str) -> None:
        """A 200 whose body never ends in time, one byte every DRIP_SECONDS, framed as `behaviour` says."""
        chunked = behaviour.startswith("drip_chunked")
        self.close_connection = behaviour != "drip_chunked"
        if behaviour == "drip_http10":
            # An HTTP/1.0 answer without a length: the body runs until the server closes.
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
        self.wfile.flush()
        sent = 0
        while self._alive():
            byte = DRIP_PREFIX[sent : sent + 1] or b" "
            self.wfile.write(b"1\r\n" + byte + b"\r\n" if chunked else byte)
            self.wfile.flush()
            sent += 1
            self._sleep(DRIP_SECONDS)

    # -- honest answers (and endpoint-specific lies) -----------------------------------------------

    def _ok_health(self, body, behaviour) -> None:
        self._send(200, b"")

    def _ok_models(self, body, behaviour) -> None:
        entry = {"id": MODEL, "object": "model", "max_model_len": MAX_MODEL_LEN}
        answer: object = {"object": "list", "data": [entry]}
        if behaviour == "data_null":
            answer = {"data": None}
        elif behaviour == "data_not_list":
            answer = {"data": {"id": MODEL}}
        elif behaviour == "model_missing":
            answer = {"data": [{"id": "another-model"}, "junk", 5]}
        elif behaviour == "max_model_len_absurd":
            entry["max_model_len"] = 10**12
        elif behaviour == "max_model_len_string":
            entry["max_model_len"] = "256"
        elif behaviour == "max_model_len_bool":
            entry["max_model_len"] = True
        elif behaviour == "max_model_len_tiny":
            entry["max_model_len"] = 3
        self._json(200, answer)

    def _ok_tokenize(self, body, behaviour) -> None:
        n = count_prompt(body) if body.get("messages") else len(_words(str(body.get("prompt") or "")))
        tokens: object = list(range(n))
        if behaviour == "tokens_empty":
            tokens = []
        elif behaviour == "tokens_null":
            tokens = None
        elif behaviour == "tokens_strings":
            tokens = [str(t) for t in range(n)]
        elif behaviour == "tokens_negative":
            tokens = [-1] * n
        elif behaviour == "tokens_constant":
            tokens = list(range(7))
        elif behaviour == "tokens_huge_ids":
            tokens = [2**70] * n
        answer = {"count": n, "max_model_len": MAX_MODEL_LEN, "tokens": tokens}
        if body.get("return_token_strs") and isinstance(tokens, list):
            # The "template" is TEMPLATE_TOKENS special tokens before the words (count_prompt).
            if body.get("messages"):
                words = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
                strs = [TEMPLATE_TOKEN] * TEMPLATE_TOKENS + _words(words)
            else:
                strs = _words(str(body.get("prompt") or ""))
            answer["token_strs"] = strs[: len(tokens)]
            if behaviour == "token_strs_missing":
                del answer["token_strs"]
            elif behaviour == "token_strs_huge":
                answer["token_strs"] = ["x" * 100_000] * len(tokens)
        self._json(200, answer)

    def _completion_numbers(self, body) -> tuple[int, int] | None:
        prompt = count_prompt(body)
        if prompt > MAX_MODEL_LEN:
            return None
        asked = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 16
        return prompt, max(0, min(asked, MAX_MODEL_LEN - prompt))

    def _ok_chat(self, body, behaviour) -> None:
        numbers = self._completion_numbers(body)
        if numbers is None:
            self._json(400, {"error": {"message": "prompt too long", "code": 400}})
            return
        prompt, produce = numbers
        message: object = {"role": "assistant", "content": " ".join(["word"] * max(produce, 1))}
        usage: object = {"prompt_tokens": prompt, "completion_tokens": produce, "total_tokens": prompt + produce}
        choice: dict = {"index": 0, "message": message, "finish_reason": "length"}
        answer: dict = {"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage}
        if behaviour == "usage_list":
            answer["usage"] = []
        elif behaviour == "choices_empty":
            answer["choices"] = []
        elif behaviour == "content_number":
            message["content"] = 12345  # type: ignore[index]
        elif behaviour == "finish_missing":
            del choice["finish_reason"]
        elif behaviour == "usage_completion_bool":
            usage["completion_tokens"] = True  # type: ignore[index]
        elif behaviour == "message_string":
            choice["message"] = "hello"
        self._json(200, answer)

    def _chunks(self, body, kind: str, behaviour: str) -> None:
        numbers = self._completion_numbers(body)
        if numbers is None:
            self._json(400, {"error": {"message": "prompt too long", "code": 400}})
            return
        prompt, produce = numbers
        self._stream_head()

        def chunk(text):
            if kind == "chat":
                return {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": text}}],
                }
            return {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]}

        if behaviour == "endless":
            while self._alive():
                self._event(chunk(" word"))
                self._sleep(0.01)
            return
        if behaviour == "drip_events":
            # One honest chunk, then the next event a byte a second (the stream is close-delimited).
            self._event(chunk(" word"))
            self.wfile.write(b"data: ")
            while self._alive():
                self.wfile.write(b" ")
                self.wfile.flush()
                self._sleep(DRIP_SECONDS)
            return
        if behaviour == "many_tiny_events":
            for _ in range(300_000):
                if not self._alive():
                    return
                self.wfile.write(b"data: {}\n")
            return
        for i in range(max(produce, 1)):
            if behaviour == "error_event" and i == 1:
                self._event(
                    {"error": {"message": "engine died mid-stream", "type": "InternalServerError", "code": 500}}
                )
                break
            if behaviour == "odd_events" and i == 1:
                self._event("this is not json")
                self.wfile.write(b"event: strange\n: comment\nretry: 5\n\n")
            if behaviour == "event_list" and i == 1:
                self._event([1, 2, 3])
            if behaviour == "event_huge" and i == 1:
                self._event('{"x": "' + "y" * (3 * 1024 * 1024) + '"}')
            if behaviour == "choices_string":
                self._event({"choices": "not a list"})
                continue
            if behaviour == "delta_number":
                self._event({"choices": [{"index": 0, "delta": {"content": 7}}]})
                continue
            self._event(chunk(" word"))
        if behaviour == "usage_string":
            self._event({"choices": [], "usage": "lots"})
        else:
            self._event({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": produce}})
        if behaviour != "no_done":
            self._event("[DONE]")

    def _ok_chat_stream(self, body, behaviour) -> None:
        self._chunks(body, "chat", behaviour)

    def _ok_completions_stream(self, body, behaviour) -> None:
        self._chunks(body, "completion", behaviour)

    def _ok_completions(self, body, behaviour) -> None:
        self._json(400, {"error": {"message": "only streaming here", "code": 400}})

    def _ok_metrics(self, body, behaviour) -> None:
        text = _metrics_text(behaviour)
        if behaviour == "metrics_missing":
            text = "# TYPE something_else gauge\nsomething_else 1\n"
        elif behaviour == "metrics_binary":
            self._send(200, b"\xff\xfe\x00garbage\x00" * 1000, "text/plain")
            return
        self._send(200, text.encode(), "text/plain; version=0.0.4")


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scenario: dict[str, str] = {}
        self.hits: list[str | None] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def set(self, scenario: dict[str, str]) -> None:
        # A new case: handlers of the previous one (drips, stalls) stop, then the new faults apply.
        self.stopping.set()
        time.sleep(0.05)
        self.stopping = threading.Event()
        self.scenario = dict(scenario)
        self.hits = []

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
