"""The README's rules table, rendered from the registry so the two cannot drift apart.

    from policies.docs import policy_table_markdown

`python -m offline_plan.config_reference` writes its output between markers in README.md, and a test compares the two.
"""

from __future__ import annotations

from policies.registry import RULES


def _cell(text: str) -> str:
    # A '|' would end the cell early, a newline the row, and '<...>' would render as an HTML tag.
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def policy_table_markdown() -> str:
    """A Markdown table of every rule: rule, level, what it catches, how to fix (one row each,
    registry order, stack rules marked "(stack)"), ending with a newline."""
    rows = ["| rule | level | what it catches | how to fix |", "|---|---|---|---|"]
    for rule in RULES:
        name = f"`{rule.name}`" + (" (stack)" if rule.stack else "")
        rows.append(f"| {name} | {rule.level} | {_cell(rule.description)} | {_cell(rule.fix)} |")
    return "\n".join(rows) + "\n"
