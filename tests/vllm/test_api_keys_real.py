"""Key rotation without downtime, proven on the pinned vLLM: two keys valid at once, others refused.

The server is started the way the program's pod starts it during a rotation: both keys in the
environment (VLLM_API_KEY, VLLM_API_KEY_NEXT, from the Secret) and the flags of
`engine_args.api_key_args(rotating=True)`, whose `$(VAR)` references are expanded here the way the
kubelet expands them in a container's args (Kubernetes "Define a Command and Arguments for a
Container": `$(VAR_NAME)` in args is replaced by the container's environment variable).
"""

from __future__ import annotations

import re
import secrets

import pytest

from components.serving import engine_args
from endpoint_tools.openai_client import Client

from .conftest import FIGURES, SERVED_NAME, serve

OLD_KEY = "old-" + secrets.token_hex(16)
NEW_KEY = "new-" + secrets.token_hex(16)


def kubelet_expand(args: list[str], env: dict[str, str]) -> list[str]:
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


@pytest.fixture(scope="module")
def rotating_server(vllm_python, tiny_model, vllm_workdir):
    env = {engine_args.API_KEY_ENV: OLD_KEY, engine_args.API_KEY_NEXT_ENV: NEW_KEY}
    args = kubelet_expand(engine_args.api_key_args(rotating=True), env)
    assert OLD_KEY in args and NEW_KEY in args  # the expansion itself worked
    with serve(vllm_python, tiny_model, vllm_workdir, args, extra_env=env, api_key=OLD_KEY,
               log_name="server-keys.log") as server:
        FIGURES.append(f"vLLM with two API keys ready in {server.start_seconds:.1f} s")
        yield server


def _completion_status(base_url: str, key: str | None) -> int:
    client = Client(base_url, api_key=key, timeout=30)
    resp = client.post("/v1/completions", {"model": SERVED_NAME, "prompt": "Hi", "max_tokens": 2}, timeout=30)
    return resp.status


def test_both_keys_of_a_rotation_are_accepted(rotating_server):
    assert _completion_status(rotating_server.base_url, OLD_KEY) == 200
    assert _completion_status(rotating_server.base_url, NEW_KEY) == 200


def test_a_wrong_or_missing_key_is_refused(rotating_server):
    assert _completion_status(rotating_server.base_url, "wrong-" + secrets.token_hex(8)) == 401
    assert _completion_status(rotating_server.base_url, None) == 401
    # Only the server's own environment variable name, not a key: a pod whose expansion failed
    # (the variable missing) must not accept the literal reference as a key either.
    assert _completion_status(rotating_server.base_url, f"$({engine_args.API_KEY_NEXT_ENV})") == 401


def test_probes_path_stays_open(rotating_server):
    # The kubelet's probes send no key; /health is outside vLLM's guarded prefixes.
    assert Client(rotating_server.base_url, timeout=30).get("/health").status == 200
