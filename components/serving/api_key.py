"""The API key of one model's server: its Secret and how the vLLM process reads it.

One place for both engine paths (components/serving/vllm.py, components/serving/kserve.py), so a
KServe model asks for its key exactly as a vLLM server does:

- the key (and, during a rotation, the next key) sits in a Secret of the serving namespace, the
  values kept as Pulumi secrets;
- the container reads it from VLLM_API_KEY through a secretKeyRef, which vLLM 0.32 reads when
  `--api-key` is absent (vllm/envs.py VLLM_API_KEY; vllm/entrypoints/serve/middleware/register.py);
- with two keys, `--api-key $(VLLM_API_KEY) $(VLLM_API_KEY_NEXT)` (engine_args.api_key_args).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.serving import engine_args as vllm_args

SECRET_KEY = "api-key"
NEXT_SECRET_KEY = "api-key-next"


def secret(
    name: str,
    k8s_name: str,
    namespace: str,
    labels: dict[str, str],
    api_key: pulumi.Input[str],
    api_key_next: pulumi.Input[str] | None,
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.Secret:
    """The Secret `<k8s_name>-api-key` holding the key, and the next key when one is given."""
    return k8s.core.v1.Secret(
        f"{name}-api-key",
        metadata={"name": f"{k8s_name}-api-key", "namespace": namespace, "labels": labels},
        type="Opaque",
        # The values stay Pulumi secrets; the provider encrypts Secret data in state.
        string_data={
            SECRET_KEY: pulumi.Output.secret(api_key),
            **({NEXT_SECRET_KEY: pulumi.Output.secret(api_key_next)} if api_key_next is not None else {}),
        },
        opts=opts,
    )


def env(secret_name: pulumi.Input[str], rotating: bool) -> list[dict[str, Any]]:
    """VLLM_API_KEY (and VLLM_API_KEY_NEXT while rotating) from the Secret, by reference."""
    out: list[dict[str, Any]] = [
        {
            "name": vllm_args.API_KEY_ENV,
            "valueFrom": {"secretKeyRef": {"name": secret_name, "key": SECRET_KEY}},
        }
    ]
    if rotating:
        out.append(
            {
                "name": vllm_args.API_KEY_NEXT_ENV,
                "valueFrom": {"secretKeyRef": {"name": secret_name, "key": NEXT_SECRET_KEY}},
            }
        )
    return out
