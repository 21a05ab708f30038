"""How every alert the stack ships is written: severity, what to do, and where its runbook entry is.

One builder for the model alerts (components/serving/alerts.py, slo.py) and the GPU alerts
(components/operators/gpu_alerts.py), so no alert goes out without a summary, a description that
says what to do, and a `runbook_url` pointing at its entry in docs/runbook.md (tests read the
runbook and fail on an alert without an entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The repository's runbook; each alert has a `## <AlertName>` section there. Markdown renderers
# (GitHub, GitLab, MkDocs) make a heading's anchor its lower-cased text, so the link is
# <runbook>#<alertname lower-cased>. Relative by default: set monitoring.runbookUrl to where the
# runbook is published (e.g. https://github.com/<org>/<repo>/blob/main/docs/runbook.md) so the
# link in Alertmanager opens.
RUNBOOK_DOC = "docs/runbook.md"

# `severity` is the label Alertmanager configurations route on: critical pages, warning tickets.
PAGE = "critical"
TICKET = "warning"
SEVERITIES = (PAGE, TICKET)


@dataclass(frozen=True)
class AlertRouting:
    """What every alert of a stack carries besides its own text."""

    runbook_url: str = RUNBOOK_DOC
    labels: dict[str, str] = field(default_factory=dict)
    """Extra labels on every alert (e.g. the model's name, for Alertmanager routing)."""


def runbook_anchor(alert: str) -> str:
    return alert.lower()


def runbook_link(runbook_url: str, alert: str) -> str:
    return f"{runbook_url}#{runbook_anchor(alert)}"


def alert_rule(
    name: str, expr: str, *, severity: str, for_: str, summary: str, description: str, routing: AlertRouting
) -> dict[str, Any]:
    """A Prometheus alerting rule (PrometheusRule `spec.groups[].rules[]` entry)."""
    if severity not in SEVERITIES:
        raise ValueError(f"alert {name}: severity {severity!r} is not one of {SEVERITIES}")
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {**routing.labels, "severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": runbook_link(routing.runbook_url, name),
        },
    }


# ---------------------------------------------------------------------------------------------
# Multi-window, multi-burn-rate SLO alerts (Google SRE Workbook, ch. 5 "Alerting on SLOs",
# https://sre.google/workbook/alerting-on-slos/, table 5-8): over a 30-day SLO period, page when
# 2% of the error budget burns in 1 hour or 5% in 6 hours, open a ticket when 10% burns in 3 days.
# Each long window is paired with a short one of 1/12 its length, and an alert fires only while
# both burn above the rate: the long window proves the burn is significant, the short one that it
# is still going on (so the alert resolves minutes after a fix, not hours).

SLO_PERIOD_HOURS = 30 * 24


@dataclass(frozen=True)
class BurnWindow:
    long: str
    """PromQL duration of the long window."""
    short: str
    long_hours: float
    burn_rate: float
    """How many times faster than "exactly the budget over the period" the errors arrive."""
    severity: str

    @property
    def budget_spent(self) -> float:
        """Share of the period's error budget gone when this rate holds for the whole long window."""
        return self.burn_rate * self.long_hours / SLO_PERIOD_HOURS


BURN_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow(long="1h", short="5m", long_hours=1, burn_rate=14.4, severity=PAGE),
    BurnWindow(long="6h", short="30m", long_hours=6, burn_rate=6, severity=PAGE),
    BurnWindow(long="3d", short="6h", long_hours=72, burn_rate=1, severity=TICKET),
)


def burn_threshold(window: BurnWindow, objective: float) -> float:
    """The error ratio at which `window` fires for an SLO `objective` (e.g. 0.99): rate x budget."""
    return window.burn_rate * (1 - objective)


def lowest_alertable_objective() -> float:
    """Below this objective the fastest page needs an error ratio above 1 and can never fire."""
    return 1 - 1 / max(w.burn_rate for w in BURN_WINDOWS)
