"""Read a container's command line the way a shell would, for the rules that look at flags.

Users write `args: ["--revision", "abc"]`, `args: ["--revision=abc"]` or a whole shell script in
`sh -c "..."`; all three become the same token list here. `$(VAR)` (Kubernetes expansion), `$VAR`
and `${VAR}` are replaced with the container's literal env values where they exist.

Flag names are read as vLLM reads them: its FlexibleArgumentParser turns every `_` into `-` in the
part of a `--flag` between the dashes and the first `.` (or `=`) before argparse sees it, so
`--api_key`, `--tokenizer_revision` and `--lora_modules` are the flags `--api-key`,
`--tokenizer-revision` and `--lora-modules` (vllm-project/vllm v0.32.0,
vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args). Every token that starts with
`--` is normalised the same way here, so no rule can be dodged with an underscore spelling.
"""

from __future__ import annotations

import re
import shlex

from policies.objects import as_dict, as_list, as_str

_REF_RE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def normalise_flag(token: str) -> str:
    """`--api_key=x` -> `--api-key=x`, `--hf_overrides.rope_scaling` -> `--hf-overrides.rope_scaling`:
    underscores become dashes in the flag's name (up to the first `=` or `.`), never in its value."""
    if not token.startswith("--"):
        return token
    key, eq, value = token.partition("=")
    name, dot, rest = key[2:].partition(".")
    return "--" + name.replace("_", "-") + dot + rest + eq + value


def literal_env(container: dict) -> dict[str, str]:
    """The container's literal env values. A name set twice keeps its last entry, as the kubelet
    does; a last entry that reads from elsewhere (valueFrom) leaves the name without a literal."""
    env = {}
    for e in as_list(container.get("env")):
        e = as_dict(e)
        name, value = as_str(e.get("name")), e.get("value")
        if not name:
            continue
        if isinstance(value, str) and "valueFrom" not in e:
            env[name] = value
        else:
            env.pop(name, None)
    return env


def is_reference(token: str) -> bool:
    """A token that is still a variable after expansion (its value comes from elsewhere)."""
    return bool(_REF_RE.search(token))


def expand(token: str, env: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return env.get(name, m.group(0))

    return _REF_RE.sub(sub, token)


def tokens(container: dict) -> list[str]:
    env = literal_env(container)
    out: list[str] = []
    for part in ("command", "args"):
        for item in as_list(container.get(part)):
            if not isinstance(item, str):
                continue
            if any(ch.isspace() for ch in item.strip()):
                try:
                    pieces = shlex.split(item, comments=False)
                except ValueError:
                    pieces = item.split()
            else:
                pieces = [item]
            out.extend(normalise_flag(expand(p, env)) for p in pieces)
    return out


def flag_values(toks: list[str], flags: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(flag, value) for every `--flag value` or `--flag=value`; value None when the flag ends the line."""
    found = []
    for i, t in enumerate(toks):
        for f in flags:
            if t == f:
                found.append((f, toks[i + 1] if i + 1 < len(toks) else None))
            elif t.startswith(f + "="):
                found.append((f, t[len(f) + 1 :]))
    return found
