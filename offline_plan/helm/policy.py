"""The policy pack over every object the Helm releases render, beside the program's own objects.

Under `pulumi preview` the pack never sees these objects: every release is a
`kubernetes:helm.sh/v3:Release`, one resource whose chart the provider installs through Helm's Go
SDK, so its objects are not Pulumi resources (policies/README.md, "Helm charts"). The plan is where
they are checked: each rendered object goes in with the file name the plan writes it under
(`helm.<namespace>.<release>.*`), so a finding on it names its release, and the stack's waivers
(policies/config/waivers.yaml, policies/waivers.py) accept the findings a chart needs, each with
its reason. A waiver that matches nothing is an error, as is a finding no waiver covers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_plan.helm.engine import RenderedRelease
from offline_plan.helm.manifests import filename
from offline_plan.mock_runtime import ROOT, Evaluation, redact_secrets, whole_numbers
from policies.check import Verdict, check_resources
from policies.registry import MANDATORY
from policies.resource import from_object
from policies.waivers import FILE_PREFIX, Applied, Waiver, apply, load

WAIVERS = Path("policies") / "config" / "waivers.yaml"


@dataclass
class ChartVerdicts:
    stack: str
    applied: Applied
    """Findings on rendered objects: kept (no waiver), waived (with the waiver), stale waivers."""
    program: list[Verdict]
    """Findings on the program's own objects that appear only with the charts' objects beside them."""
    waivers: list[Waiver]

    @property
    def failing(self) -> bool:
        return bool(self.applied.stale) or any(v.level == MANDATORY for v in [*self.applied.kept, *self.program])


def decision_reasons(verdicts: ChartVerdicts | None) -> list[str]:
    """What in the charts' verdicts stops a deploy, as reasons for plan.md's opening and plan.json."""
    if verdicts is None:
        return []
    counts: dict[str, int] = {}
    for v in [*verdicts.applied.kept, *verdicts.program]:
        if v.level == MANDATORY:
            counts[v.policy] = counts.get(v.policy, 0) + 1
    reasons = [
        f"{n} mandatory `{policy}` finding(s) on rendered chart objects no waiver covers "
        "(see Policy verdicts over rendered charts)"
        for policy, n in sorted(counts.items())
    ]
    if verdicts.applied.stale:
        reasons.append(f"{len(verdicts.applied.stale)} stale waiver(s) in policies/config/waivers.yaml")
    return reasons


def _key(v: Verdict) -> tuple[str, str, str, str | None, str]:
    return (v.policy, v.kind, v.name, v.namespace, v.message)


def _rendered_file(v: Verdict) -> bool:
    return os.path.basename(v.file or "").startswith(FILE_PREFIX + ".")


def chart_verdicts(
    evaluation: Evaluation,
    rendered: list[RenderedRelease],
    program_verdicts: list[Verdict],
    config: dict[str, Any] | None,
    project_dir: Path = ROOT,
) -> ChartVerdicts:
    """Every rule over the program's objects, its cloud resources and the rendered objects together
    (as one stack), then the stack's waivers over the findings on rendered objects. A malformed
    waiver file raises WaiverError (a ValueError: the plan exits 2)."""
    waivers = load(str(project_dir / WAIVERS)) if (project_dir / WAIVERS).exists() else []
    resources = [from_object(obj) for obj in evaluation.kubernetes_objects]
    resources += [
        from_object({"type": r.type, "name": r.name, "props": whole_numbers(redact_secrets(r.inputs))})
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
    for release in rendered:
        for obj in [*release.crds, *release.objects]:
            resources.append(from_object(obj, filename(release, obj)))
    verdicts = check_resources(resources, config)
    known = {_key(v) for v in program_verdicts}
    on_program = [v for v in verdicts if not _rendered_file(v) and _key(v) not in known]
    applied = apply([v for v in verdicts if _rendered_file(v)], waivers, evaluation.stack)
    return ChartVerdicts(evaluation.stack, applied, on_program, waivers)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _release_of(v: Verdict) -> str:
    # helm.<namespace>.<release>.<Kind>-...: the plan's own file names.
    parts = os.path.basename(v.file or "").split(".")
    return f"{parts[1]}/{parts[2]}" if len(parts) > 3 else "?"


def plan_section(result: ChartVerdicts) -> list[str]:
    out = [
        "## Policy verdicts over rendered charts",
        "",
        (
            "The pack's rules over the objects the Helm releases render, beside the program's own objects "
            "(the same pack config). `pulumi preview` does not run the pack on them: each release is one "
            "`helm.sh/v3:Release` resource and its objects are not Pulumi resources (policies/README.md). "
            f"Findings a chart needs are waived in `{WAIVERS}`, each with its reason."
        ),
        "",
    ]
    kept = [*result.program, *result.applied.kept]
    mandatory = sum(v.level == MANDATORY for v in kept)
    out.append(
        f"{mandatory} mandatory, {len(kept) - mandatory} advisory not waived; {len(result.applied.waived)} "
        f"waived; {len(result.applied.stale)} stale waivers."
    )
    if kept:
        out += ["", "| level | policy | release | resource | message |", "|---|---|---|---|---|"]
        for v in result.program:
            out.append(f"| {v.level} | {v.policy} | (the program's) | {v.kind}/{v.name} | {_cell(v.message)} |")
        for v in result.applied.kept:
            out.append(f"| {v.level} | {v.policy} | {_release_of(v)} | {v.kind}/{v.name} | {_cell(v.message)} |")
    if result.applied.stale:
        out += ["", "Stale waivers (each matches no finding of this stack; remove it):", ""]
        out += [f"- {line}" for line in result.applied.stale_lines(str(WAIVERS))]
    used: dict[int, tuple[Waiver, dict[str, int]]] = {}
    for v, w in result.applied.waived:
        counts = used.setdefault(w.index, (w, {}))[1]
        obj = f"{v.kind}/{v.name}"
        counts[obj] = counts.get(obj, 0) + 1
    if used:
        out += ["", "Waivers used:", "", "| # | release | policy | objects (findings) | reason | source |"]
        out.append("|---|---|---|---|---|---|")
        for index in sorted(used):
            w, counts = used[index]
            objects = ", ".join(f"`{o}` ({n})" for o, n in counts.items())
            out.append(f"| {index} | `{w.release}` | {w.policy} | {objects} | {_cell(w.reason)} | `{w.source}` |")
    return [*out, ""]
