"""Formats of the strings a stack file holds, as the APIs that receive them spell them.

Pure functions and patterns, no pydantic: the schema's validators call them, and so may anything
downstream that must check a value the same way (a name built from a validated one, say).
"""

from __future__ import annotations

import difflib
import re

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
LABEL_KEY_RE = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# An image reference with a tag or digest; the policy pack enforces "not latest" on the output too.
IMAGE_RE = re.compile(r"^[^\s@]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def default_model_name(repo: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (a valid DNS label)."""
    name = re.sub(r"[^a-z0-9-]+", "-", repo.split("/")[-1].lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if not name or not name[0].isalpha():
        name = f"m-{name}"
    return name[:63].rstrip("-")


def validate_image(v: str) -> str:
    if not IMAGE_RE.match(v) or ("@" not in v and ":" not in v.rsplit("/", 1)[-1]):
        raise ValueError(f"{v!r} has no tag or digest; pin it, e.g. vllm/vllm-openai:v0.32.0 or an @sha256: digest")
    tag = v.rsplit("/", 1)[-1].split("@")[0].partition(":")[2]
    if tag == "latest" and "@" not in v:
        raise ValueError(f"{v!r} uses the floating tag latest; pin a version tag or an @sha256: digest")
    return v


def pinned_commit(v: str) -> str:
    """A Hub revision as a 40-character lower-case commit SHA; anything else names the fix."""
    if COMMIT_RE.match(v):
        return v
    if re.fullmatch(r"[0-9a-fA-F]{40}", v):
        raise ValueError(f"{v!r} has upper-case letters; write the commit SHA in lower case")
    if re.fullmatch(r"[0-9a-f]{7,39}", v):
        raise ValueError(f"{v!r} is a short SHA; pin the full 40-character commit SHA "
                         "(the Hub shows it under 'Files and versions' > 'History')")
    raise ValueError(
        f"{v!r} is a branch or tag; pin a 40-character commit SHA "
        "(the Hub shows it under 'Files and versions' > 'History')"
    )


def hub_repo_id(v: str) -> str:
    if not REPO_ID_RE.match(v):
        raise ValueError(f"{v!r} is not a Hub repo id; write it as `org/name`, e.g. Qwen/Qwen2.5-7B-Instruct")
    return v


# A DNS name (RFC 1123 subdomain, at least two labels): what a listener hostname and a certificate
# need. Wildcards are not accepted: an ACME HTTP-01 challenge cannot prove one.
HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def hostname(v: str) -> str:
    if not HOSTNAME_RE.match(v):
        raise ValueError(f"{v!r} is not a DNS name; give the lower-case host clients call, e.g. llm.example.org "
                         "(no scheme, port, path or wildcard)")
    return v


# Another name a client may send as `model` (a Hub repo id such as meta-llama/Llama-3.1-8B-Instruct,
# or a short name): printable, no spaces, at most 256 characters.
ALIAS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$")


def model_alias(v: str) -> str:
    if not ALIAS_RE.match(v):
        raise ValueError(f"{v!r} is not a usable model name; use letters, digits and . _ : / @ + - (no spaces), "
                         "starting with a letter or digit, at most 256 characters")
    return v


def dns_label(v: str) -> str:
    if not DNS_LABEL_RE.match(v):
        raise ValueError(
            f"{v!r} is not a valid name; use lower-case letters, digits and '-', starting with a letter, at most 63 characters"
        )
    return v


def did_you_mean(value: str, options) -> str:
    close = difflib.get_close_matches(value, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""



def exact_chart_version(v: str) -> str:
    """Helm matches chart versions literally; a range or `latest` would float."""
    if not re.fullmatch(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", v):
        raise ValueError(f"{v!r} is not an exact chart version; pin one such as 26.4.1 (ranges and latest float)")
    return v
