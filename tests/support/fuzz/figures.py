"""What a fuzz run tried and found, per tool: cases, tracebacks, hangs, crashes, wrong exits.

Each property test records every case it ran. With LLM_SERVING_FUZZ_FIGURES set (`make fuzz` sets
it to a file), the records are appended to that file as JSON lines and `python -m
tests.support.fuzz.figures FILE` prints the table the report quotes. Without it nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter, defaultdict

FIGURES_ENV = "LLM_SERVING_FUZZ_FIGURES"
KINDS = ("tried", "traceback", "hang", "crash", "wrong_exit", "unclear_message")


def record(tool: str, kind: str | None, seconds: float = 0.0, problems: list[str] | None = None) -> None:
    """One case of `tool`; `kind` is None for a case that behaved, else one of KINDS[1:]; `problems`
    what was wrong (its first line names the failure in the summary)."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    what = _signature(problems[0]) if problems else None
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"tool": tool, "kind": kind, "seconds": round(seconds, 3), "what": what}) + "\n")


def _signature(problem: str) -> str:
    """A failure's kind in a few words: the exception line of a traceback, else the first line."""
    lines = [line.strip() for line in problem.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]+(Error|Exception|Exit|Interrupt)\b", line):
            return re.sub(r"\d+", "N", line)[:110]
    return re.sub(r"\d+", "N", lines[0])[:110] if lines else ""


def summary(path: str) -> str:
    counts: dict[str, Counter] = defaultdict(Counter)
    slowest: dict[str, float] = defaultdict(float)
    whats: Counter = Counter()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            counts[row["tool"]]["tried"] += 1
            if row["kind"]:
                counts[row["tool"]][row["kind"]] += 1
                whats[(row["tool"], row.get("what") or row["kind"])] += 1
            slowest[row["tool"]] = max(slowest[row["tool"]], row["seconds"])
    header = f"{'tool':<12}" + "".join(f"{k:>17}" for k in KINDS) + f"{'slowest case s':>16}"
    lines = [header]
    for tool in sorted(counts):
        lines.append(f"{tool:<12}" + "".join(f"{counts[tool][k]:>17}" for k in KINDS) + f"{slowest[tool]:>16.1f}")
    if whats:
        lines.append("\ndistinct failures (cases):")
        for (tool, what), n in sorted(whats.items(), key=lambda item: (item[0][0], -item[1])):
            lines.append(f"  {tool:<10} {n:>6}  {what}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1]))
