"""A local stand-in for a container registry, for tools/resolve_image_digests.py.

It speaks the two exchanges the resolver needs (the OCI Distribution API's manifest GET and the
anonymous bearer-token flow Docker Hub, ghcr.io and quay.io use): a manifest request without a
token gets 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...`, the realm hands out
a token, and the same request with `Authorization: Bearer <token>` gets the manifest with its
`Docker-Content-Digest`. A fault (set per test) makes it misbehave the ways a hostile or broken
registry can: lie about the digest, drip or stall, send a huge body or a wrong content type. An
`Answer` (set per test or drawn by the fuzzer) is the manifest answer written byte for byte, which
is how it lies below the HTTP library's level: a status line that is not HTTP, too many headers, a
bad chunk, a body shorter than its Content-Length, a body that is not the manifest its type names.
`token` replaces the token the realm hands out (control characters, non-Latin-1 text).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "stand-in-token"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "size": 1234,
                "digest": "sha256:" + "ab" * 32,
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
LIST_TYPE = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"


def _descriptor(media_type: str) -> dict:
    return {"mediaType": media_type, "size": 1234, "digest": "sha256:" + "cd" * 32}


def manifest_of(media_type: str, with_media_type: bool = True) -> bytes:
    """An honest manifest of the kind `media_type` names (an index or list of one, or an image
    manifest with a config and one layer), with or without its `mediaType` field."""
    doc: dict = {"schemaVersion": 2}
    if with_media_type:
        doc["mediaType"] = media_type
    if media_type in (INDEX_TYPE, LIST_TYPE):
        entry = OCI_MANIFEST_TYPE if media_type == INDEX_TYPE else DOCKER_MANIFEST_TYPE
        doc["manifests"] = [{**_descriptor(entry), "platform": {"architecture": "amd64", "os": "linux"}}]
    else:
        oci = media_type == OCI_MANIFEST_TYPE
        doc["config"] = _descriptor(
            "application/vnd.oci.image.config.v1+json" if oci else "application/vnd.docker.container.image.v1+json"
        )
        doc["layers"] = [
            _descriptor(
                "application/vnd.oci.image.layer.v1.tar+gzip"
                if oci
                else "application/vnd.docker.image.rootfs.diff.tar.gzip"
            )
        ]
    return json.dumps(doc).encode()


@dataclass(frozen=True)
class Answer:
    """The manifest answer, written as given: `framing` is how the body is delimited (`length`,
    `close`: until the connection closes, `chunked`, `bad_chunk`: a chunk size that is not hex,
    `truncated`: a Content-Length twice the bytes sent, then the close); `digest` is the
    Docker-Content-Digest header ("honest" for the body's own sha256, None for none)."""

    body: bytes = MANIFEST
    content_type: str | None = INDEX_TYPE
    status_line: bytes = b"HTTP/1.1 200 OK"
    framing: str = "length"
    digest: str | None = "honest"
    extra_headers: tuple[tuple[bytes, bytes], ...] = ()

    def raw(self) -> bytes:
        digest = "sha256:" + hashlib.sha256(self.body).hexdigest() if self.digest == "honest" else self.digest
        head = [self.status_line]
        if self.content_type is not None:
            head.append(b"Content-Type: " + self.content_type.encode("latin-1"))
        if digest is not None:
            head.append(b"Docker-Content-Digest: " + digest.encode("latin-1"))
        head += [name + b": " + value for name, value in self.extra_headers]
        body = self.body
        if self.framing == "length":
            head.append(b"Content-Length: %d" % len(body))
        elif self.framing == "truncated":
            head.append(b"Content-Length: %d" % (2 * len(body) + 1))
        elif self.framing in ("chunked", "bad_chunk"):
            head.append(b"Transfer-Encoding: chunked")
            size = b"%x" % len(body) if self.framing == "chunked" else b"zz"
            body = (size + b"\r\n" + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        head.append(b"Connection: close")
        return b"\r\n".join(head) + b"\r\n\r\n" + body


class StandInRegistry:
    def __init__(self) -> None:
        self.fault: str | None = None
        self.answer: Answer | None = None
        self.token: str | None = None
        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                outer.requests.append((self.path, self.headers.get("Authorization")))
                fault = outer.fault
                if self.path.startswith("/token"):
                    if fault == "bad_token_json":
                        return self._send(200, b"{not json", "application/json")
                    if fault == "huge_token":
                        return self._send(200, json.dumps({"token": "x" * 200_000}).encode(), "application/json")
                    token = TOKEN if outer.token is None else outer.token
                    return self._send(200, json.dumps({"token": token}).encode(), "application/json")
                if not self.path.startswith("/v2/"):
                    return self._send(404, b"{}", "application/json")
                if fault == "redirect":
                    self.send_response(307)
                    self.send_header("Location", "http://example.invalid/elsewhere")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                token = TOKEN if outer.token is None else outer.token
                if self.headers.get("Authorization") != f"Bearer {token}" and fault != "no_auth":
                    realm = f"http://127.0.0.1:{outer.port}/token"
                    if fault == "https_realm_elsewhere":
                        realm = "http://203.0.113.7/token"  # plain http to a non-loopback host
                    scope = "repository:" + self.path.split("/v2/", 1)[1].rsplit("/manifests/", 1)[0] + ":pull"
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="stand-in",scope="{scope}"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if outer.answer is not None:
                    self.close_connection = True
                    self.wfile.write(outer.answer.raw())
                    return None
                if "/manifests/missing" in self.path:
                    return self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', "application/json")
                if fault == "lie":
                    return self._send(200, MANIFEST, INDEX_TYPE, digest="sha256:" + "0" * 64)
                if fault == "malformed_digest":
                    return self._send(200, MANIFEST, INDEX_TYPE, digest="md5:abc")
                if fault == "wrong_type":
                    return self._send(200, b"<html>login</html>", "text/html")
                if fault == "huge":
                    # Declares nothing and streams 64 MiB: the reader must stop at its limit.
                    self.send_response(200)
                    self.send_header("Content-Type", INDEX_TYPE)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        for _ in range(1024):
                            self.wfile.write(b"x" * 65536)
                    except OSError:
                        pass
                    return None
                if fault == "huge_declared":
                    self.send_response(200)
                    self.send_header("Content-Type", INDEX_TYPE)
                    self.send_header("Content-Length", str(10 * 1024**3))
                    self.end_headers()
                    return None
                if fault == "stall":
                    time.sleep(30)
                    return None
                if fault == "drip":
                    # A byte every 0.3 s: no single read waits long, the whole answer never ends in time.
                    self.send_response(200)
                    self.send_header("Content-Type", INDEX_TYPE)
                    self.send_header("Content-Length", str(len(MANIFEST)))
                    self.end_headers()
                    try:
                        for b in MANIFEST:
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(0.3)
                    except OSError:
                        pass
                    return None
                return self._send(200, MANIFEST, INDEX_TYPE, digest=None if fault == "no_digest_header" else DIGEST)

            def _send(self, code, body, ctype, digest=None):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if digest:
                    self.send_header("Docker-Content-Digest", digest)
                self.end_headers()
                self.wfile.write(body)
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> StandInRegistry:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
