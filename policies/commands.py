"""Read a container's command line the way a shell would, for the rules that look at flags.

Users write `args: ["--revision", "abc"]`, `args: ["--revision=abc"]` or a whole shell script in
`sh -c "..."`; all three become the same token list here. `$(VAR)` (Kubernetes expansion), `$VAR`
and `${VAR}` are replaced with the container's literal env values where they exist.
"""

from __future__ import annotations

import re
import shlex

from policies.objects import as_dict, as_list, as_str

_REF_RE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def literal_env(container: dict) -> dict[str, str]:
    env = {}
    for e in as_list(container.get("env")):
        e = as_dict(e)
        name, value = as_str(e.get("name")), e.get("value")
        if name and isinstance(value, str):
            env[name] = value
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
            out.extend(expand(p, env) for p in pieces)
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
