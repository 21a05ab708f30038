"""Kubernetes resource quantities as numbers (CPU in cores, memory in bytes), for sums in the plan.

Suffixes as the API defines them: decimal `m` (milli), `k`, `M`, `G`, `T`, `P`, `E` and binary
`Ki` ... `Ei` (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/).
"""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE](?P<exp>[+-]?[0-9]+))?(?P<suffix>[a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    **{s: 1024.0 ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}


def parse(value: object) -> float | None:
    """The quantity as a number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    m = _QUANTITY.match(str(value).strip())
    if not m or m["suffix"] not in _SUFFIX:
        return None
    number = float(m["number"]) * (10.0 ** int(m["exp"]) if m["exp"] else 1.0)
    return number * _SUFFIX[m["suffix"]]


def cpu(cores: float) -> str:
    return f"{cores * 1000:.0f}m" if cores < 1 else f"{cores:g}"


def memory(size: float) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"
