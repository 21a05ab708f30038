"""helm-chart-pinned: every Helm release names one exact chart version.

An empty version means "newest in the repository", and a range ('^1.2', '~1.2.0', '1.x', '>=1')
means "newest that matches" at install time; either way two `pulumi up` runs a week apart may
install different charts. Local chart directories are exempt: their version is the Chart.yaml
committed next to the program.
"""

from __future__ import annotations

import re

from policies.objects import Finding, as_dict, as_str, is_unknown

# SemVer 2.0.0 (semver.org), with the leading 'v' Helm tolerates.
_EXACT_VERSION_RE = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)

# Pulumi Helm resource types, plus the Flux HelmRelease custom resource for plain YAML.
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")


def is_exact_version(version: str) -> bool:
    return bool(_EXACT_VERSION_RE.match(version.strip()))


def _is_local_chart(chart: str) -> bool:
    return chart.startswith(("./", "../", "/", "file://")) or chart in (".", "..")


def version_problem(chart: str, version) -> str | None:
    if is_unknown(version):
        return None
    if _is_local_chart(chart):
        return None
    v = as_str(version)
    if v is None or not v.strip():
        return "names no chart version, so it installs whatever is newest"
    if not is_exact_version(v):
        return f"asks for chart version '{v}', a range or non-SemVer value rather than one exact version"
    return None


def helm_chart_pinned(resource_type: str, name: str, props: dict, config: dict) -> list[Finding]:
    if resource_type in HELM_TYPES:
        chart = as_str(props.get("chart")) or ""
        if is_unknown(props.get("chart")):
            return []
        problem = version_problem(chart, props.get("version"))
        what = f"{resource_type.rsplit(':', 1)[-1]}/{name}"
    elif resource_type.startswith("kubernetes:helm.toolkit.fluxcd.io/"):
        chart_spec = as_dict(as_dict(as_dict(props.get("spec")).get("chart")).get("spec"))
        chart = as_str(chart_spec.get("chart")) or ""
        problem = version_problem(chart, chart_spec.get("version"))
        what = f"HelmRelease/{name}"
    else:
        return []
    if not problem:
        return []
    return [
        Finding(
            f"{what}: chart '{chart}' {problem}; set version to the exact chart version you tested (e.g. '1.2.3').",
            None,
        )
    ]
