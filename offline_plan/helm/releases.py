"""The Helm releases a stack installs, as the program passes them to the engine, and the chart
directory each is rendered from.

A release is recorded by the mock runtime as a `kubernetes:helm.sh/v3:Release` resource whose
inputs are the ReleaseArgs the program built (chart, version, name, namespace, values,
repositoryOpts). The chart directory is `charts/<chart name>-<version>/` (charts/SOURCES.md says
where each came from), so a chart bump in the program without its chart here fails the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_plan import mock_runtime
from offline_plan.mock_runtime import ROOT, Evaluation, redact_secrets, whole_numbers

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
# Look-ups whose mock answer is what the real cloud answers, not a stand-in: the standard AWS
# partition's name and DNS suffix (https://docs.aws.amazon.com/general/latest/gr/rande.html). A value
# that merely contains "amazonaws.com" (the EFA device plugin's ECR image) is not a placeholder.
REAL_ANSWERS = {"aws:index/getPartition:getPartition"}
CHARTS_DIR = ROOT / "charts"


@dataclass(frozen=True)
class Release:
    resource: str
    """The Pulumi resource name (what `pulumi preview` shows)."""
    name: str
    namespace: str
    chart: str
    """As the program passes it: a name in a repository, or an `oci://` reference."""
    version: str
    values: dict[str, Any]
    placeholders: tuple[str, ...]
    """Dotted value paths whose value the mock runtime stood in for (a cloud-computed output or a
    secret), so the chart rendered with a placeholder there."""

    @property
    def chart_name(self) -> str:
        # An OCI chart reference ends in the chart's name (Helm: `oci://host/path/<name>`); a
        # repository chart is its name alone.
        return self.chart.rstrip("/").rsplit("/", 1)[-1]

    @property
    def label(self) -> str:
        return (
            f"helm release {self.namespace}/{self.name} (resource {self.resource}, "
            f"chart {self.chart_name} {self.version})"
        )

    def chart_dir(self, charts_dir: Path | None = None) -> Path:
        # CHARTS_DIR is read at call time, so a test can point the plan at another folder.
        return (charts_dir or CHARTS_DIR) / f"{self.chart_name}-{self.version}"


def _placeholder_markers(evaluation: Evaluation) -> set[str]:
    """Strings the mock runtime made up: computed outputs, look-up answers and resource ids."""
    markers: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str) and len(value) >= 6:
            markers.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(mock_runtime._COMPUTED_OUTPUTS)
    walk(
        [
            answer
            for token, answer in mock_runtime._CALL_RESULTS.items()
            if not callable(answer) and token not in REAL_ANSWERS
        ]
    )
    for r in evaluation.resources:
        markers.add(mock_runtime.mock_id(r.type, r.name))
        markers.add(f"arn:aws:mock:::{r.name}")
    return markers


def placeholder_paths(values: Any, markers: set[str], path: str = "") -> list[str]:
    if isinstance(values, dict):
        return [p for k, v in values.items() for p in placeholder_paths(v, markers, f"{path}.{k}" if path else k)]
    if isinstance(values, list):
        return [p for i, v in enumerate(values) for p in placeholder_paths(v, markers, f"{path}[{i}]")]
    if isinstance(values, str) and (
        values == mock_runtime.REDACTED or values.startswith("<secret") or any(m in values for m in markers)
    ):
        return [path]
    return []


def releases(evaluation: Evaluation) -> list[Release]:
    """Every Helm release of the evaluated stack, in (namespace, name) order."""
    markers = _placeholder_markers(evaluation)
    found = []
    for r in evaluation.of_type(RELEASE_TYPE):
        values = whole_numbers(redact_secrets(r.inputs.get("values") or {}))
        found.append(
            Release(
                resource=r.name,
                name=str(r.inputs.get("name") or r.name),
                namespace=str(r.inputs.get("namespace") or "default"),
                chart=str(r.inputs.get("chart") or ""),
                version=str(r.inputs.get("version") or ""),
                values=values,
                placeholders=tuple(placeholder_paths(values, markers)),
            )
        )
    return sorted(found, key=lambda rel: (rel.namespace, rel.name))
