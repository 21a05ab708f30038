"""What a fuzz run tried and found, per tool: cases, tracebacks, hangs, crashes, wrong exits.

Each property test records every case it ran. With LLM_SERVING_FUZZ_FIGURES set (`make fuzz` sets
it to a file), the records are appended to that file as JSON lines and `python -m
tests.fuzz.figures FILE` prints the table the report quotes. Without it nothing is written.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict

FIGURES_ENV = "LLM_SERVING_FUZZ_FIGURES"
KINDS = ("tried", "traceback", "hang", "crash", "wrong_exit", "unclear_message")


def record(tool: str, kind: str | None, seconds: float = 0.0) -> None:
    """One case of `tool`; `kind` is None for a case that behaved, else one of KINDS[1:]."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"tool": tool, "kind": kind, "seconds": round(seconds, 3)}) + "\n")


def summary(path: str) -> str:
    counts: dict[str, Counter] = defaultdict(Counter)
    slowest: dict[str, float] = defaultdict(float)
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            counts[row["tool"]]["tried"] += 1
            if row["kind"]:
                counts[row["tool"]][row["kind"]] += 1
            slowest[row["tool"]] = max(slowest[row["tool"]], row["seconds"])
    header = f"{'tool':<12}" + "".join(f"{k:>17}" for k in KINDS) + f"{'slowest case s':>16}"
    lines = [header]
    for tool in sorted(counts):
        lines.append(f"{tool:<12}" + "".join(f"{counts[tool][k]:>17}" for k in KINDS) + f"{slowest[tool]:>16.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1]))
