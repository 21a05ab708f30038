"""Every alert the stack ships has a runbook entry: what it means, how to confirm, what to do."""

from __future__ import annotations

import re

import pytest

from common.alerting import RUNBOOK_DOC, AlertRouting, runbook_anchor
from components.operators.gpu_alerts import gpu_alert_rules
from components.serving import alerts, observability, slo
from components.serving.targets import LEADER_WORKER_SET, Target
from stack_config.models import SloConfig
from tests.support import paths

ROOT = paths.ROOT
RUNBOOK = ROOT / RUNBOOK_DOC
PARTS = ("**What it means.**", "**How to confirm.**", "**What to do.**")
# Sections that are not alerts: the SLO primer and how to add an alert.
GUIDE_SECTIONS = {"Latency SLOs and burn rates", "Adding an availability alert for another component"}


def sections(text: str) -> dict[str, str]:
    """`## Heading` -> its body, up to the next `## `."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, spaces to '-', punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def shipped_alerts() -> list[dict]:
    objectives = slo.latency_slos(SloConfig())
    rules = []
    for kind in ("Deployment", LEADER_WORKER_SET):
        t = Target("m", "ns", "m", 600, 900, workload_kind=kind)
        rules += [
            r
            for g in observability.rule_groups(t, alerts.AlertThresholds(), objectives, RUNBOOK_DOC)
            for r in g["rules"]
            if "alert" in r
        ]
    rules += gpu_alert_rules(AlertRouting())
    return rules


def runbook_problems(alert_names: set[str], text: str) -> list[str]:
    found = sections(text)
    problems = [f"{name}: no '## {name}' section" for name in sorted(alert_names) if name not in found]
    for name in sorted(alert_names & set(found)):
        problems += [f"{name}: no {part}" for part in PARTS if part not in found[name]]
    problems += [f"'## {h}' is not an alert the stack ships" for h in sorted(set(found) - alert_names - GUIDE_SECTIONS)]
    return problems


def test_every_shipped_alert_has_a_complete_runbook_entry():
    names = {r["alert"] for r in shipped_alerts()}
    assert len(names) == 17
    assert runbook_problems(names, RUNBOOK.read_text()) == []


def test_a_missing_or_incomplete_entry_is_reported():
    text = RUNBOOK.read_text()
    names = {r["alert"] for r in shipped_alerts()}
    assert runbook_problems(names | {"VllmInventedAlert"}, text) == [
        "VllmInventedAlert: no '## VllmInventedAlert' section"
    ]
    cut = text.replace("**How to confirm.** `dmesg | grep -i xid`", "`dmesg | grep -i xid`")
    assert runbook_problems(names, cut) == ["GpuXidError: no **How to confirm.**"]
    assert runbook_problems(names - {"GpuXidError"}, text) == ["'## GpuXidError' is not an alert the stack ships"]


@pytest.mark.parametrize("rule", shipped_alerts(), ids=lambda r: r["alert"])
def test_runbook_url_points_at_the_alerts_heading(rule):
    url = rule["annotations"]["runbook_url"]
    path, anchor = url.split("#")
    assert path == RUNBOOK_DOC and (ROOT / path).exists()
    assert anchor == runbook_anchor(rule["alert"]) == github_anchor(rule["alert"])
    assert rule["alert"] in sections(RUNBOOK.read_text())
