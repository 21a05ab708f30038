"""Small value helpers shared by every rule: findings, unknowns and defensive accessors.

Rules read user-written YAML and engine-sent properties, where any field may be missing, null or of
the wrong type; the accessors turn all of those into "absent" so a rule never raises on bad input.
During `pulumi preview` some values are not known yet; the Pulumi adapter replaces them with
`UNKNOWN`, and rules skip a check whose verdict would depend on one (no false violation, no crash).
"""

from __future__ import annotations

import math
import re
from typing import Any


class _Unknown:
    """A value the engine cannot know during preview (e.g. an image built by another resource)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"

    def __bool__(self) -> bool:
        return False


UNKNOWN = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


class Finding(str):
    """A violation message that also remembers which container it is about.

    It is a `str`, so the rule functions really do return "a list of violation messages"; the
    checker reads `.container` to fill its container column.
    """

    container: str | None

    def __new__(cls, message: str, container: str | None = None) -> Finding:
        obj = super().__new__(cls, message)
        obj.container = container
        return obj


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_number(value: Any) -> float | None:
    """A probe field or replica count as a number; bools and strings are not numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range: larger than any threshold
        return math.inf if value > 0 else -math.inf


def present(value: Any) -> bool:
    """A resource quantity that is set: not missing, not null, not an empty string."""
    if value is None or is_unknown(value):
        return value is UNKNOWN  # an unknown quantity is set, its value is just not known yet
    if isinstance(value, str):
        return value.strip() != ""
    return True


COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def is_commit(value: str) -> bool:
    """A full 40-hex Git commit (what the Hub returns as `sha`), never a branch or tag name."""
    return bool(COMMIT_RE.match(value))


def seconds(value: float) -> str:
    return f"{value:g} s"
