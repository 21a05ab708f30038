"""no-literal-secrets: tokens and keys come from Secrets, never from the manifest.

A literal `value:` lands in the Deployment spec, in `kubectl get -o yaml`, in Pulumi state and in
every plan file; a `secretKeyRef` keeps it in one place that RBAC guards.
"""

from __future__ import annotations

import re

from policies.commands import flag_values, is_reference, tokens
from policies.objects import Finding, as_dict, as_list, as_str
from policies.workloads import workload

# Name segments that mark a credential. Matched per '_'-separated segment so that
# MAX_NUM_BATCHED_TOKENS or TOKENIZERS_PARALLELISM are not mistaken for one.
_SECRET_SEGMENTS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIALS"}
_SECRET_PAIRS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET_KEY", "AUTH_KEY")
# Names that hold a path to a credential, not the credential.
_PATH_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_PATHS")
# Hugging Face user access tokens start with hf_; OpenAI-style keys with sk-.
_TOKEN_VALUE_RE = re.compile(r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{20,}")
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper.endswith(_PATH_SUFFIXES):
        return False
    segments = set(upper.split("_"))
    return bool(segments & _SECRET_SEGMENTS) or any(p in upper for p in _SECRET_PAIRS)


def looks_like_token(value: str) -> bool:
    return bool(_TOKEN_VALUE_RE.search(value))


def no_literal_secrets(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            for e in as_list(c.container.get("env")):
                e = as_dict(e)
                name, value = as_str(e.get("name")) or "", as_str(e.get("value"))
                if not value or (is_reference(value) and not looks_like_token(value)):
                    continue
                if is_secret_name(name) or looks_like_token(value):
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} sets env {name} to a literal value that is (or looks like) a "
                            f"credential; store it in a Secret and use valueFrom.secretKeyRef instead.",
                            c.name,
                        )
                    )
            for flag, value in flag_values(tokens(c.container), SECRET_FLAGS):
                if value and not is_reference(value) and not value.startswith("-"):
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} passes {flag} with a literal value on its command line; put the key "
                            f"in a Secret, expose it as an env var with secretKeyRef and pass {flag} $(VAR_NAME) (or "
                            "let the program read the env var).",
                            c.name,
                        )
                    )
            for text in (t for t in tokens(c.container) if looks_like_token(t)):
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} has a token-like value ('{text[:6]}...') in its command line; move it "
                        f"to a Secret and reference it through an env var with secretKeyRef.",
                        c.name,
                    )
                )
                break
    return out
