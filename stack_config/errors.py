"""Config problems, phrased for the person who wrote the stack file: one line each, naming the key."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from common.untrusted import excerpt
from stack_config.formats import did_you_mean

# A key the user wrote, shown as a path segment as is; anything else is quoted (escaped, shortened).
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


class ConfigError(Exception):
    """A stack configuration problem, already phrased for the person who wrote the stack file."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class CrossCheckError(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


# ---------------------------------------------------------------------------------------------
# Turning pydantic's errors into one line per problem, naming the key path as the user wrote it.


def _loc_to_path(loc: tuple) -> str:
    if loc and loc[-1] == "[key]":
        loc = loc[:-2]  # a bad key of a mapping: the message quotes the key, the path names the mapping
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif str(part).startswith(("function-after", "function-before", "tagged-union")) or part in (
            "int",
            "literal['auto']",
            "constrained-int",
            "[key]",
        ):
            continue
        else:
            text = str(part) if _PLAIN_KEY.fullmatch(str(part)) else f"[{excerpt(part)}]"
            path += f".{text}" if path and not text.startswith("[") else text
    return path


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Aliases accepted at the location of an unknown key, for a 'did you mean' hint."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    if current is None:
        return []
    return [f.alias or n for n, f in current.model_fields.items()]


def _fix(e: ErrorDetails) -> str:
    """pydantic's message, with the fix spelled out where its words alone do not say it."""
    if e["type"] == "finite_number":
        return "must be a finite number (not .nan or .inf); write a number"
    if e["type"] in ("less_than_equal", "less_than", "greater_than_equal", "greater_than"):
        return e["msg"].replace("Input should be", "must be")
    return e["msg"]


def format_validation_error(err: ValidationError, root: type[BaseModel]) -> list[str]:
    """One line per problem; `root` is the model validated, for the keys allowed at each path."""
    problems: list[str] = []
    for e in err.errors():
        loc = tuple(e["loc"])
        ctx_error = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_error, CrossCheckError):
            prefix = _loc_to_path(loc)
            for key, msg in ctx_error.problems:
                problems.append(f"{prefix + '.' if prefix else ''}{key}: {msg}")
            continue
        path = _loc_to_path(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            known = _known_keys(root, loc)
            key = str(loc[-1])
            hint = did_you_mean(key, known)
            if not _PLAIN_KEY.fullmatch(key):
                # An empty or odd key cannot be shown as a path; name its parent and quote it.
                path = _loc_to_path(loc[:-1]) or "(top level)"
                hint = f" {excerpt(loc[-1])}{hint}"
            problems.append(f"{path}: unknown key{hint}; allowed here: {', '.join(known)}")
        elif e["type"] == "missing":
            problems.append(f"{path}: required key is missing")
        elif e["type"] == "value_error":
            problems.append(f"{path}: {str(ctx_error or e['msg']).removeprefix('Value error, ')}")
        elif e["type"] in ("literal_error", "enum"):
            allowed = e["msg"].removeprefix("Input should be ").replace("should be", "use")
            problems.append(f"{path}: {excerpt(e['input'])} is not allowed; use {allowed}")
        else:
            got = f" (got {excerpt(e['input'])})" if "input" in e and not isinstance(e["input"], (dict, list)) else ""
            problems.append(f"{path}: {_fix(e)}{got}")
    # A union (tensorParallelSize: "auto" | int) reports once per branch; keep one line per path.
    seen: dict[str, str] = {}
    for p in problems:
        seen.setdefault(p.split(": ", 1)[0], p)
    return list(seen.values())
