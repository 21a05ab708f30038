"""Input from outside the program, read within limits: files, JSON, and how a bad value is quoted.

Every tool reads something it did not write: a stack file, a config.json from the Hub, Kubernetes
manifests, a pack config, the answers of an HTTP server. Each of them may be hostile or broken in
ways a parser turns into a hang, an exhausted memory or a traceback: a FIFO that blocks a read
forever, /dev/zero, 10,000 nested brackets, a 5,000-digit number, NaN. The limits below are decided
here once, and every reader goes through these functions, so a reader added later gets them too.

Standard library only (common/ is read by the endpoint tools and the policy pack alone).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from typing import Any

# Nesting of JSON or YAML values. The deepest legitimate input the tools read is a CRD's OpenAPI
# schema in a manifest (the InferenceService CRD nests about 40 levels); stack configs, config.json
# files and OpenAI answers nest fewer than 10. Python code that walks a value recursively stays far
# from the interpreter's recursion limit (1000) at this depth.
MAX_NESTING_DEPTH = 100

# Sizes of what is read whole into memory.
MAX_STACK_FILE_BYTES = 1 * 1024 * 1024  # a Pulumi stack file is a few KB
MAX_CONFIG_VALUE_BYTES = 1 * 1024 * 1024  # one config value the Pulumi CLI hands over as JSON
MAX_MODEL_CONFIG_BYTES = 16 * 1024 * 1024  # config.json / index files of a Hub repo (KBs to ~1 MB)
MAX_MANIFEST_FILE_BYTES = 64 * 1024 * 1024  # one YAML file the policy checker reads (libyaml: seconds)
MAX_PACK_CONFIG_BYTES = 1 * 1024 * 1024  # the policy pack's --config JSON

# How much of a bad value an error message quotes.
EXCERPT_CHARS = 40


class InputLimitError(ValueError):
    """Input that cannot be read safely; the message is one line saying what was wrong."""


class NotJsonError(InputLimitError):
    """Text that is not JSON at all (as opposed to JSON beyond the limits)."""


# ---------------------------------------------------------------------------------------------
# Secrets that people paste where they do not belong


# Token formats with a fixed, documented prefix; a match anywhere in a value is enough. The
# prefixes are the issuers' own: Hugging Face user access tokens start with hf_
# (https://huggingface.co/docs/hub/en/security-tokens), OpenAI keys with sk- (sk-proj-...),
# GitHub tokens with ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_
# (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/),
# AWS access key ids with AKIA/ASIA (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html),
# Google API keys with AIza, Slack tokens with xox?-, and PEM private keys with their BEGIN line;
# GitLab personal access tokens with glpat- (https://docs.gitlab.com/security/tokens/#token-prefixes)
# and npm access tokens with npm_ (https://github.blog/changelog/2021-09-23-npm-has-a-new-access-token-format/).
_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Hugging Face token (hf_...)", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("an OpenAI-style API key (sk-...)", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("an AWS access key id (AKIA/ASIA...)", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Google API key (AIza...)", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Slack token (xox?-...)", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a GitLab token (glpat-...)", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("an npm token (npm_...)", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
)


# Prefixed tokens whose body is random mixed-case text; a lower-case name that happens to start
# with the prefix (sk-llama-3-finetune) is not one.
_MIXED_CASE_KINDS = frozenset({"a Hugging Face token (hf_...)", "an OpenAI-style API key (sk-...)"})


def secret_kind(text: str) -> str | None:
    """What kind of secret `text` carries (e.g. "a Hugging Face token (hf_...)"), or None."""
    if not isinstance(text, str):
        return None
    for kind, pattern in _SECRET_PATTERNS:
        for match in pattern.finditer(text):
            body = match.group()
            if kind in _MIXED_CASE_KINDS and not (any(c.isupper() for c in body) and any(c.islower() for c in body)):
                continue
            return kind
    return None


# ---------------------------------------------------------------------------------------------
# Quoting a bad value


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_control_characters(text: str) -> bool:
    """Line breaks, tabs, NUL, escape sequences and the Unicode line/paragraph separators."""
    return bool(_CONTROL.search(text))


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quotation of a bad value for an error message.

    Control characters are escaped (a value never breaks the one-line message or the terminal),
    long values are cut with their length said, and a value that looks like a secret is never
    quoted at all: error messages end up in CI logs.
    """
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes of binary data>"
    if isinstance(value, (dict, list, tuple, set)):
        return f"<a {'mapping' if isinstance(value, dict) else 'list'} of {len(value)} entries>"
    text = value if isinstance(value, str) else repr(value)
    kind = secret_kind(text)
    if kind:
        return f"<redacted: looks like {kind}>"
    shown = text[:limit]
    quoted = repr(shown) if isinstance(value, str) else shown
    if len(text) > limit:
        quoted = (
            f"{quoted[:-1]}...{quoted[-1]} ({len(text):,} characters)"
            if isinstance(value, str)
            else f"{quoted}... ({len(text):,} characters)"
        )
    return quoted


# ---------------------------------------------------------------------------------------------
# Files


_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def is_regular_file(path: str | os.PathLike) -> bool:
    """True for a regular file (following symlinks); never opens it, so a FIFO cannot block."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_regular_file(path: str | os.PathLike, max_bytes: int, what: str | None = None) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, or InputLimitError saying why not.

    Opened non-blocking and checked with fstat before any read: a FIFO, a device (/dev/zero) or a
    socket is refused without blocking and without reading, whatever it was when the name was
    stat'ed.
    """
    what = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputLimitError(f"{what}: no such file") from None
    except IsADirectoryError:
        raise InputLimitError(f"{what}: is a folder, not a file") from None
    except (OSError, ValueError) as exc:
        raise InputLimitError(f"{what}: cannot be opened ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputLimitError(f"{what}: is {file_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise InputLimitError(f"{what}: is {info.st_size:,} bytes, more than the {max_bytes:,} this tool reads")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:  # the file grew after fstat
                raise InputLimitError(f"{what}: is more than the {max_bytes:,} bytes this tool reads")
        return b"".join(chunks)
    except OSError as exc:
        raise InputLimitError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def decode_utf8(data: bytes, what: str) -> str:
    """Text of UTF-8 bytes (a leading byte-order mark dropped), or InputLimitError naming the offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputLimitError(
            f"{what}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def read_text_file(path: str | os.PathLike, max_bytes: int, what: str | None = None) -> str:
    what = what or str(path)
    return decode_utf8(read_regular_file(path, max_bytes, what), what)


# ---------------------------------------------------------------------------------------------
# Values


def nesting_depth(value: Any, limit: int = MAX_NESTING_DEPTH) -> int:
    """Depth of nested lists and mappings (a scalar is 0); stops counting just past `limit`.

    Iterative, so it cannot itself overflow the stack, and it visits a shared value (a YAML alias)
    once per path only up to the limit; a value that contains itself counts as too deep.
    """
    deepest = 0
    stack: list[tuple[Any, int, frozenset[int]]] = [(value, 0, frozenset())]
    while stack:
        node, depth, ancestors = stack.pop()
        if isinstance(node, dict):
            children = list(node.keys()) + list(node.values())
        elif isinstance(node, (list, tuple)):
            children = list(node)
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > limit or id(node) in ancestors:
            return limit + 1
        inner = ancestors | {id(node)}
        stack.extend((child, depth, inner) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def _no_constant(name: str) -> Any:
    raise NotJsonError(f"{name} is not a number JSON allows; use a finite number")


def _finite_float(text: str) -> float:
    # `1e400` is valid JSON that Python reads as infinity, which every later `int()` or bound check
    # trips over; it is refused here like the NaN and Infinity literals.
    value = float(text)
    if not math.isfinite(value):
        raise NotJsonError(f"the number {text[:40]} is beyond the range of a 64-bit float")
    return value


def loads_json(text: str | bytes, what: str, *, max_bytes: int, max_depth: int = MAX_NESTING_DEPTH) -> Any:
    """Parse JSON within limits: size, nesting depth, no NaN/Infinity, no 5,000-digit numbers.

    Every failure is an InputLimitError whose message is one line naming `what`.
    """
    if len(text) > max_bytes:
        raise InputLimitError(f"{what}: is {len(text):,} bytes, more than the {max_bytes:,} this tool reads")
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text), what)
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except NotJsonError as exc:
        raise NotJsonError(f"{what}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise NotJsonError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise InputLimitError(f"{what}: JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise InputLimitError(f"{what}: not usable JSON ({' '.join(str(exc).split())[:120]})") from None
    if nesting_depth(value, max_depth) > max_depth:
        raise InputLimitError(f"{what}: JSON nested deeper than {max_depth} levels")
    return value


def finite_number_problem(value: Any) -> str | None:
    """Why a parsed number cannot be used (NaN, infinity, a float overflow), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    return None
