"""Check Helm values against the pinned chart's own values.yaml.

Helm accepts any key and silently ignores one no template reads, so a misspelled key
(`dcgmExporter.serviceMonitr.enabled`) deploys the chart's default without a word. Neither the
gpu-operator nor the network-operator chart ships a values.schema.json, so the upstream
values.yaml is the reference (tests/fixtures/helm, provenance in tests/fixtures/SOURCES.md).

The add-on charts (components/addons) are checked against a transcribed list of the key paths the
program sets instead (tests/fixtures/helm/addon-value-keys.yaml), with the same rules.

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

from tests.support import paths

HELM_FIXTURES = paths.FIXTURES / "helm"

# Chart name -> the upstream values.yaml of the version the program pins.
CHART_VALUES_FILES = {
    "llm-d-router-gateway": HELM_FIXTURES / "llm-d-router-gateway-values.yaml",
    "gpu-operator": HELM_FIXTURES / "gpu-operator-values.yaml",
    "network-operator": HELM_FIXTURES / "network-operator-values.yaml",
    "karpenter": HELM_FIXTURES / "karpenter-values.yaml",
    "body-based-routing": HELM_FIXTURES / "body-based-routing-values.yaml",
}

# Paths whose default is a mapping with keys but which the chart renders whole (toYaml), so any key
# is valid there: karpenter's `nodeSelector` (templates/deployment.yaml:252-255 at v1.14.1:
# `{{- with .Values.nodeSelector }} nodeSelector: {{- toYaml . | nindent 8 }}`).
OPEN_MAPPINGS = {"karpenter": {"nodeSelector"}}


# Chart -> dotted key path -> where a template reads it. The value of such a key is a leaf.
TEMPLATE_ONLY_KEYS = {
    "gpu-operator": {
        # values.yaml lines 348-349 show `# config:` / `# name: custom-dcgm-exporter-metrics` commented.
        "dcgmExporter.config.name": (
            "NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/templates/clusterpolicy.yaml:561-564"
        ),
        # values.yaml lines 61 and 75 show `#version: ""` commented (the appVersion is the default).
        "operator.version": "charts/gpu-operator-v26.7.0/templates/_helpers.tpl:71-73 (gpu-operator.fullimage)",
        "validator.version": "charts/gpu-operator-v26.7.0/templates/clusterpolicy.yaml (spec.validator.version)",
    },
    # values.yaml shows `# tag` commented under operator (the appVersion is the default).
    "network-operator": {"operator.tag": "charts/network-operator-26.4.1/templates/operator.yaml:55"},
}


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@functools.cache
def subchart_defaults(chart: str, version: str | None = None) -> dict[str, dict[str, Any]]:
    """Per dependency of the chart copied in charts/<chart>-<version>/charts/: its values.yaml with
    the parent's block for it laid over (what Helm coalesces), so keys set under a subchart's name
    are checked against the subchart's own values (Grafana's `image` is not in the parent's file)."""
    found = sorted((paths.ROOT / "charts").glob(f"{chart}-{version or '*'}/"))
    if len(found) != 1:
        return {}
    parent = yaml.safe_load((found[0] / "values.yaml").read_text()) or {}
    out = {}
    for values_file in sorted(found[0].glob("charts/*/values.yaml")):
        name = values_file.parent.name
        own = yaml.safe_load(values_file.read_text()) or {}
        block = parent.get(name)
        out[name] = _merged(own, block) if isinstance(block, dict) else own
    return out


@functools.cache
def chart_defaults(chart: str) -> dict[str, Any]:
    path = CHART_VALUES_FILES.get(chart)
    if path is None:
        raise KeyError(f"no upstream values.yaml for chart {chart!r}; add it under tests/fixtures/helm")
    defaults = yaml.safe_load(path.read_text()) or {}
    for name, sub in subchart_defaults(chart).items():
        block = defaults.get(name)
        defaults[name] = _merged(sub, block) if isinstance(block, dict) else sub
    for dotted in TEMPLATE_ONLY_KEYS.get(chart, {}):
        *parents, leaf = dotted.split(".")
        node = defaults
        for part in parents:
            node = node.setdefault(part, {})
        node.setdefault(leaf, None)
    return defaults


def unknown_value_paths(
    values: dict[str, Any], defaults: dict[str, Any], prefix: str = "", open_paths: frozenset[str] = frozenset()
) -> list[str]:
    """Every path in `values` the chart's `defaults` do not have, with the reason; [] when all exist."""
    problems: list[str] = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if path in open_paths:
            continue
        if key not in defaults:
            problems.append(f"{path}: not a key of the chart's values.yaml")
            continue
        default = defaults[key]
        if isinstance(default, dict) and default:
            if not isinstance(value, dict):
                problems.append(f"{path}: the chart expects a mapping here, got {type(value).__name__}")
                continue
            problems += unknown_value_paths(value, default, path, open_paths)
        elif isinstance(value, dict) and default is not None and not isinstance(default, dict):
            problems.append(f"{path}: the chart has a {type(default).__name__} here, got a mapping")
        # An empty mapping, a list or a null default is open: the value is a leaf.
    return problems


# The add-on charts (components/addons): not whole values files but the transcribed list of the key
# paths the program sets, each with its line in the upstream file at the tag (provenance in the file
# and in tests/fixtures/SOURCES.md).
ADDON_VALUE_KEYS = HELM_FIXTURES / "addon-value-keys.yaml"


@functools.cache
def addon_value_keys() -> dict[str, dict[str, Any]]:
    return yaml.safe_load(ADDON_VALUE_KEYS.read_text())


def unlisted_value_paths(values: dict[str, Any], keys: dict[str, dict[str, Any]], prefix: str = "") -> list[str]:
    """Every path in `values` the transcribed key list does not have, with the reason; [] when all do.

    A `mapping` key is walked further; an `open` key takes whatever is set there; a `scalar` key
    must not receive a mapping.
    """
    problems: list[str] = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        entry = keys.get(path)
        if entry is None:
            problems.append(
                f"{path}: not a key the chart's values.yaml has (the transcribed key list in tests/fixtures/helm)"
            )
        elif entry["shape"] == "mapping":
            if isinstance(value, dict):
                problems += unlisted_value_paths(value, keys, path)
            else:
                problems.append(f"{path}: the chart expects a mapping here, got {type(value).__name__}")
        elif entry["shape"] == "scalar" and isinstance(value, dict):
            problems.append(f"{path}: the chart has a {type(entry.get('default')).__name__} here, got a mapping")
    return problems


# A dependency chart under an alias: the values under the alias are the library chart's, checked
# against its transcribed key list (chart -> alias -> key list file and its top-level entry).
SUBCHART_KEYS = {
    "llm-d-router-gateway": {"router": (HELM_FIXTURES / "llm-d-router-routerlib-value-keys.yaml", "routerlib")},
}


@functools.cache
def _subchart_keys(path: Path, entry: str) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())[entry]


def chart_name(chart: str) -> str:
    """`oci://ghcr.io/kserve/charts/kserve-crd` -> `kserve-crd`; a repo chart name stays as it is."""
    return chart.rsplit("/", 1)[-1]


def check_chart_values(chart: str, values: dict[str, Any], version: str | None = None) -> list[str]:
    name = chart_name(chart)
    listed = addon_value_keys().get(name)
    if listed is not None:
        own = dict(values)
        problems = []
        for sub, defaults in subchart_defaults(name, str(listed["version"])).items():
            if sub in own and not any(k == sub or k.startswith(f"{sub}.") for k in listed["keys"] or {}):
                problems += unknown_value_paths({sub: own.pop(sub)}, {sub: defaults})
        problems += unlisted_value_paths(own, listed["keys"] or {})
        if version is not None and str(listed["version"]) != version:
            problems.append(f"version {version}: the key list was transcribed from {listed['version']}; regenerate it")
        return [f"{name}: {p}" for p in problems]
    problems: list[str] = []
    own = dict(values)
    for alias, (path, entry) in SUBCHART_KEYS.get(name, {}).items():
        listed = _subchart_keys(path, entry)
        sub = own.pop(alias, None)
        if sub is not None:
            problems += [f"{alias}.{p}" for p in unlisted_value_paths(sub, listed["keys"] or {})]
        if version is not None and str(listed["version"]) != version:
            problems.append(f"version {version}: the {alias} key list was transcribed from {listed['version']}")
    open_paths = frozenset(OPEN_MAPPINGS.get(name, ()))
    problems += unknown_value_paths(own, chart_defaults(name), open_paths=open_paths)
    return [f"{name}: {p}" for p in problems]
