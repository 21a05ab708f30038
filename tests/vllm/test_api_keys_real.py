"""Key rotation without downtime, proven on the pinned vLLM: two keys valid at once, others refused.

The session's server is started the way the program's pod starts it during a rotation
(tests/support/vllm_server.py `serve`): both keys in the environment and the flags of
`engine_args.api_key_args(rotating=True)`, expanded as the kubelet expands `$(VAR)` in args.
"""

from __future__ import annotations

import secrets

from components.serving import engine_args
from endpoint_tools.openai_client import Client
from tests.support.vllm_server import SERVED_NAME


def _completion_status(base_url: str, key: str | None) -> int:
    client = Client(base_url, api_key=key, timeout=30)
    resp = client.post("/v1/completions", {"model": SERVED_NAME, "prompt": "Hi", "max_tokens": 2}, timeout=30)
    return resp.status


def test_both_keys_of_a_rotation_are_accepted(vllm_server):
    assert vllm_server.api_key != vllm_server.next_api_key
    assert _completion_status(vllm_server.base_url, vllm_server.api_key) == 200
    assert _completion_status(vllm_server.base_url, vllm_server.next_api_key) == 200


def test_a_wrong_or_missing_key_is_refused(vllm_server):
    assert _completion_status(vllm_server.base_url, "wrong-" + secrets.token_hex(8)) == 401
    assert _completion_status(vllm_server.base_url, None) == 401
    # Only the server's own environment variable name, not a key: a pod whose expansion failed
    # (the variable missing) must not accept the literal reference as a key either.
    assert _completion_status(vllm_server.base_url, f"$({engine_args.API_KEY_NEXT_ENV})") == 401


def test_probes_path_stays_open(vllm_server):
    # The kubelet's probes send no key; /health is outside vLLM's guarded prefixes.
    assert Client(vllm_server.base_url, timeout=30).get("/health").status == 200
