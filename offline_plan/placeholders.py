"""Every value the mock runtime made up, marked as a placeholder wherever plan.md prints it.

The mock runtime answers the program's cloud look-ups (zones, the zones offering an instance type, subnets, route
tables, security groups, the account) and fills in what a cloud computes (endpoints, ARNs, ids) with stand-ins
(offline_plan/mock_runtime.py). The program passes some of them on into what the plan prints (a pool's zones, a
mount target named after a subnet id), where they would read as facts about the user's account. A real
`pulumi preview` asks the cloud for each of them.

`invented(evaluation)` collects those strings; `mark(text, values)` marks every line of plan.md that prints one.
"""

from __future__ import annotations

import re
from typing import Any

from offline_plan import mock_runtime

MARK = "(placeholder)"
LEGEND = (
    f"Values marked {MARK} are the mock runtime's stand-ins for what the cloud answers (zones, subnets, ids, ARNs, "
    "the account); a real `pulumi preview` looks them up."
)
# Answers that are the cloud's own constants, not made up: the partition of the commercial regions, the route every
# default route table has.
_REAL_ANSWERS = {"aws", "amazonaws.com", "0.0.0.0/0"}
_LOOKUP_ID = "id"  # a data source's own id ("mock"): the program never passes it on


def _leaves(value: Any, key: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, str(k))]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v, key)]
    return [(key, value)] if isinstance(value, str) else []


def invented(evaluation: mock_runtime.Evaluation) -> set[str]:
    """The strings the mock made up for this evaluation: look-up answers (not the arguments the program passed,
    nor a value the stack file itself holds), computed outputs and created resources' ids and ARNs."""
    config_text = "\n".join(evaluation.config.values())
    found: set[str] = set()
    for _, args, result in evaluation.call_results:
        given = {v for _, v in _leaves(args)}
        for key, value in _leaves(result):
            if key != _LOOKUP_ID and value not in given:
                found.add(value)
    for r in evaluation.resources:
        found.update(v for _, v in _leaves(mock_runtime._COMPUTED_OUTPUTS.get(r.type, {})))
        if r.custom and r.read_id is None:
            found.add(mock_runtime.mock_id(r.type, r.name))
            found.add(f"arn:aws:mock:::{r.name}")
    # Short strings and the stack's own values (its region, as a look-up echoes it) are not the mock's invention.
    return {v for v in found if len(v) >= 6 and v not in _REAL_ANSWERS and v not in config_text}


def _pattern(values: set[str]) -> re.Pattern[str] | None:
    if not values:
        return None
    # Longest first, and whole tokens only: `us-east-1b` is not the start of `us-east-1bz`, but a subnet id inside a
    # resource name (`...-mount-subnet-0000000000001aaaa`) is found.
    alternatives = "|".join(re.escape(v) for v in sorted(values, key=lambda v: (-len(v), v)))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")


def _mark_cell(cell: str, pattern: re.Pattern[str]) -> str:
    if "placeholder" in cell or not pattern.search(cell):
        return cell
    return f"{cell.rstrip()} {MARK} "


def mark(text: str, values: set[str]) -> tuple[str, bool]:
    """`text` with every line (every table cell) that prints one of `values` marked; and whether any was."""
    pattern = _pattern(values)
    if pattern is None:
        return text, False
    out, marked, in_code = [], False, False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif "placeholder" in line or not pattern.search(line):
            pass
        elif in_code:
            line, marked = f"{line}  {MARK}", True
        elif line.startswith("|") and line.rstrip().endswith("|"):
            # Cells split on the pipes that are not escaped (a cell's own `|` is written `\\|`).
            cells = re.split(r"(?<!\\)\|", line.rstrip()[1:-1])
            line, marked = "|" + "|".join(_mark_cell(c, pattern) for c in cells) + "|", True
        else:
            line, marked = f"{line} {MARK}", True
        out.append(line)
    return "\n".join(out), marked


def unmarked_lines(text: str, values: set[str]) -> list[str]:
    """Lines of `text` that print one of `values` without saying it is a placeholder (for the tests)."""
    pattern = _pattern(values)
    return [line for line in text.split("\n") if pattern and pattern.search(line) and "placeholder" not in line]
