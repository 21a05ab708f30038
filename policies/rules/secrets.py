"""no-literal-secrets: tokens and keys come from Secrets, never from the manifest.

A literal `value:` lands in the Deployment spec, in `kubectl get -o yaml`, in Pulumi state and in
every plan file; a `secretKeyRef` keeps it in one place that RBAC guards.

Where a literal is looked for, per container: its env values, its command line (`command`, `args`,
a `sh -c` script, flags spelled with `_` as vLLM reads them), the exec commands of its probes and
lifecycle hooks (`livenessProbe`/`readinessProbe`/`startupProbe`/`lifecycle.postStart`/`preStop`
`.exec.command`, which the kubelet runs inside the container: the same spec, the same leak) and the
headers of its httpGet probes and hooks (Kubernetes expands `$(VAR)` only in `command`, `args` and
env `value`s, https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/,
so a credential in `httpHeaders` is always a literal; vLLM needs none on /health, since its API-key
middleware guards only the /v1, /v2, /inference and /cohere prefixes: vllm-project/vllm v0.32.0,
vllm/entrypoints/serve/middleware/authenticate.py GUARDED_PREFIX).
What counts as a token is common/untrusted.py `secret_kind` (the issuers' documented prefixes),
plus an `Authorization: Bearer|Basic <literal>` header on a command line. A ConfigMap that an
`envFrom` or `configMapKeyRef` hands a credential to is the stack rule `no-secrets-in-config-maps`
(policies/rules/config_map_secrets.py).
"""

from __future__ import annotations

import re

from common.untrusted import secret_kind
from policies.commands import flag_values, is_reference, tokens
from policies.objects import Finding, as_dict, as_list, as_str
from policies.workloads import ContainerView, workload

# Name segments that mark a credential. Matched per '_'-separated segment so that
# MAX_NUM_BATCHED_TOKENS or TOKENIZERS_PARALLELISM are not mistaken for one.
_SECRET_SEGMENTS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIALS"}
_SECRET_PAIRS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET_KEY", "AUTH_KEY")
# Names that hold a path to a credential, not the credential.
_PATH_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_PATHS")
# Hugging Face user access tokens start with hf_; OpenAI-style keys with sk-.
_TOKEN_VALUE_RE = re.compile(r"\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{20,}")
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")
# An HTTP credential written into a command (curl -H 'Authorization: Bearer ...').
_AUTH_HEADER_RE = re.compile(r"(?i)\bauthorization:\s*(?:bearer|basic)\s+(\S+)")
# Header names that carry a credential (RFC 9110 section 11.6.2 Authorization, 11.7.2 Proxy-Authorization).
_CREDENTIAL_HEADERS = {"AUTHORIZATION", "PROXY-AUTHORIZATION"}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HOOKS = ("postStart", "preStop")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper.endswith(_PATH_SUFFIXES):
        return False
    segments = set(upper.split("_"))
    return bool(segments & _SECRET_SEGMENTS) or any(p in upper for p in _SECRET_PAIRS)


def looks_like_token(value: str) -> bool:
    return bool(_TOKEN_VALUE_RE.search(value)) or secret_kind(value) is not None


def _handlers(container: dict) -> list[tuple[str, dict]]:
    """(where, handler) for every probe and lifecycle hook of a container."""
    found = [(key, as_dict(container.get(key))) for key in PROBES if isinstance(container.get(key), dict)]
    lifecycle = as_dict(container.get("lifecycle"))
    found += [
        (f"lifecycle.{key}", as_dict(lifecycle.get(key))) for key in HOOKS if isinstance(lifecycle.get(key), dict)
    ]
    return found


def _command_problems(toks: list[str]) -> list[str]:
    """What in one command line is a literal credential (flag values, token-like text, auth headers)."""
    problems = []
    for flag, value in flag_values(toks, SECRET_FLAGS):
        if value and not is_reference(value) and not value.startswith("-"):
            problems.append(f"passes {flag} with a literal value")
    for text in toks:
        if looks_like_token(text):
            problems.append(f"has a token-like value ('{text[:6]}...')")
            break
    for m in _AUTH_HEADER_RE.finditer(" ".join(toks)):
        if not is_reference(m.group(1)):
            problems.append("sends a literal Authorization header")
            break
    return problems


def _handler_findings(ref: str, c: ContainerView) -> list[Finding]:
    out = []
    env = as_list(c.container.get("env"))
    for where, handler in _handlers(c.container):
        command = as_list(as_dict(handler.get("exec")).get("command"))
        for problem in _command_problems(tokens({"command": command, "env": env})):
            out.append(
                Finding(
                    f"{ref}: {c.label}'s {where} exec command {problem}; read the credential from an env var that "
                    "comes from a Secret (secretKeyRef) and use $(VAR_NAME) or $VAR_NAME in the command.",
                    c.name,
                )
            )
        for header in as_list(as_dict(handler.get("httpGet")).get("httpHeaders")):
            header = as_dict(header)
            name, value = as_str(header.get("name")) or "", as_str(header.get("value")) or ""
            secret_named = name.upper() in _CREDENTIAL_HEADERS or is_secret_name(name.replace("-", "_"))
            if value and (secret_named or looks_like_token(value)):
                out.append(
                    Finding(
                        f"{ref}: {c.label}'s {where} sends header {name} with a literal credential (probe headers "
                        "take no $(VAR) expansion); probe an endpoint that needs no key (vLLM's /health), or use an "
                        "exec probe that reads the key from a secretKeyRef env var.",
                        c.name,
                    )
                )
    return out


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
            if any(not is_reference(m.group(1)) for m in _AUTH_HEADER_RE.finditer(" ".join(tokens(c.container)))):
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} sends a literal Authorization header from its command line; read the "
                        "key from an env var that comes from a Secret (secretKeyRef) and write $(VAR_NAME).",
                        c.name,
                    )
                )
            out += _handler_findings(w.ref, c)
    return out
