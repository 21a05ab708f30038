"""Check Helm values against the pinned chart's own values.yaml.

Helm accepts any key and silently ignores one no template reads, so a misspelled key
(`dcgmExporter.serviceMonitr.enabled`) deploys the chart's default without a word. Neither the
gpu-operator nor the network-operator chart ships a values.schema.json, so the upstream
values.yaml is the reference (tests/fixtures/helm, provenance in tests/fixtures/SOURCES.md).

Rules of the walk:
- a key must exist at the same path in the chart's values;
- where the chart's default is a mapping with keys, the program's mapping is walked further;
- where the chart leaves a value open (an empty mapping such as `labels: {}` or `data: {}`, a
  list such as `tolerations`, or a null), whatever the program puts there is a leaf;
- a mapping set where the chart has a scalar (or the reverse) is reported too;
- a few keys the chart's templates read although its values.yaml only shows them in a comment
  (TEMPLATE_ONLY_KEYS) count as keys, each with the template line that reads it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

HELM_FIXTURES = Path(__file__).parent / "fixtures" / "helm"

# Chart name -> the upstream values.yaml of the version the program pins.
CHART_VALUES_FILES = {
    "gpu-operator": HELM_FIXTURES / "gpu-operator-values.yaml",
    "network-operator": HELM_FIXTURES / "network-operator-values.yaml",
}


# Chart -> dotted key path -> where a template reads it. The value of such a key is a leaf.
TEMPLATE_ONLY_KEYS = {
    "gpu-operator": {
        # values.yaml lines 348-349 show `# config:` / `# name: custom-dcgm-exporter-metrics` commented.
        "dcgmExporter.config.name":
            "NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/templates/clusterpolicy.yaml:561-564",
    },
}


@functools.cache
def chart_defaults(chart: str) -> dict[str, Any]:
    path = CHART_VALUES_FILES.get(chart)
    if path is None:
        raise KeyError(f"no upstream values.yaml for chart {chart!r}; add it under tests/fixtures/helm")
    defaults = yaml.safe_load(path.read_text()) or {}
    for dotted in TEMPLATE_ONLY_KEYS.get(chart, {}):
        *parents, leaf = dotted.split(".")
        node = defaults
        for part in parents:
            node = node.setdefault(part, {})
        node.setdefault(leaf, None)
    return defaults


def unknown_value_paths(values: dict[str, Any], defaults: dict[str, Any], prefix: str = "") -> list[str]:
    """Every path in `values` the chart's `defaults` do not have, with the reason; [] when all exist."""
    problems: list[str] = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in defaults:
            problems.append(f"{path}: not a key of the chart's values.yaml")
            continue
        default = defaults[key]
        if isinstance(default, dict) and default:
            if not isinstance(value, dict):
                problems.append(f"{path}: the chart expects a mapping here, got {type(value).__name__}")
                continue
            problems += unknown_value_paths(value, default, path)
        elif isinstance(value, dict) and default is not None and not isinstance(default, dict):
            problems.append(f"{path}: the chart has a {type(default).__name__} here, got a mapping")
        # An empty mapping, a list or a null default is open: the value is a leaf.
    return problems


def check_chart_values(chart: str, values: dict[str, Any]) -> list[str]:
    return [f"{chart}: {p}" for p in unknown_value_paths(values, chart_defaults(chart))]
