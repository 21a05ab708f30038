"""Reading PromQL the way Prometheus does (promql-parser, pinned in requirements.txt), for the tests.

`selectors` walks a parsed expression and returns every series selector in it, so a test can check
each metric name (and each matcher) an alert, recording rule, dashboard panel or autoscaler query
depends on, instead of searching the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import promql_parser

from tests.support import paths

FIXTURES = paths.FIXTURES


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[tuple[str, str, str], ...]
    """(label, operator, value); the operator as promql-parser prints it (e.g. MatchOp.Re)."""

    def value_of(self, label: str) -> str | None:
        return next((v for n, _, v in self.matchers if n == label), None)


def _walk(node, found: list[Selector]) -> None:
    if type(node).__name__ == "VectorSelector":
        matchers = tuple((m.name, str(m.op), m.value) for m in node.matchers.matchers)
        name = node.name or next((v for n, _, v in matchers if n == "__name__"), None)
        found.append(Selector(name, matchers))
        return
    for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, (str, int, float)):
            _walk(child, found)
    for child in getattr(node, "args", None) or []:
        _walk(child, found)


def selectors(expr: str) -> list[Selector]:
    """Every series selector of `expr`; raises ValueError when it does not parse."""
    found: list[Selector] = []
    _walk(promql_parser.parse(expr), found)
    return found


def metric_names(expr: str) -> set[str]:
    return {s.name for s in selectors(expr) if s.name}


def comparisons(expr: str) -> list[tuple[str, str, float]]:
    """(metric name, operator, number) of every `<selector> <op> <number>` in `expr`."""
    found: list[tuple[str, str, float]] = []

    def walk(node) -> None:
        if type(node).__name__ == "BinaryExpr":
            lhs, rhs = node.lhs, node.rhs
            if type(lhs).__name__ == "VectorSelector" and type(rhs).__name__ == "NumberLiteral":
                found.append((lhs.name, str(node.op), rhs.val))
        for attr in ("expr", "lhs", "rhs", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for child in getattr(node, "args", None) or []:
            walk(child)

    walk(promql_parser.parse(expr))
    return found


def documented_names(path: Path) -> set[str]:
    """The back-quoted names of the first column of a markdown table (a transcribed fixture)."""
    return set(re.findall(r"^\| `([A-Za-z_:][A-Za-z0-9_:]*)` \|", path.read_text(), re.MULTILINE))


KUBE_STATE_METRICS = documented_names(FIXTURES / "kube-state-metrics.md")


def dcgm_names() -> set[str]:
    """Every name the DCGM exporter knows that the fixtures record: each row of its default counters
    file, enabled or commented out, and the names tests/fixtures/dcgm/FIELDS.md cites."""
    csv_rows = re.findall(
        r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,", (FIXTURES / "dcgm" / "dcp-metrics-included.csv").read_text(), re.MULTILINE
    )
    return set(csv_rows) | documented_names(FIXTURES / "dcgm" / "FIELDS.md")


_COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
_ABSENCE = {"absent", "absent_over_time"}


def _filters(node) -> bool:
    """Whether an expression returns series only while a condition holds (what an alert needs)."""
    kind = type(node).__name__
    if kind == "ParenExpr":
        return _filters(node.expr)
    if kind == "AggregateExpr":
        return _filters(node.expr)
    if kind == "Call":
        return node.func.name in _ABSENCE
    if kind != "BinaryExpr":
        return False
    op = str(node.op)
    if op in _COMPARISONS:
        return not (node.modifier and node.modifier.return_bool)
    if op == "or":
        return _filters(node.lhs) and _filters(node.rhs)
    if op == "unless":
        return _filters(node.lhs)
    # `and` and arithmetic keep only series present on both sides: either side's condition filters.
    return _filters(node.lhs) or _filters(node.rhs)


def always_firing_branches(expr: str) -> list[str]:
    """The parts of an alert expression that would return series whatever their value, e.g. the
    left side of `(a) or (b) > 1`, which PromQL reads as `(a) or ((b) > 1)`. [] when every path filters."""
    problems: list[str] = []

    def walk(node) -> None:
        kind = type(node).__name__
        if kind == "ParenExpr":
            walk(node.expr)
        elif kind == "BinaryExpr" and str(node.op) == "or":
            walk(node.lhs)
            walk(node.rhs)
        elif not _filters(node):
            problems.append(node.prettify())

    walk(promql_parser.parse(expr))
    return problems
