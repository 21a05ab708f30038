"""Render one release with Helm's own engine, offline.

helm-python-sdk wraps Helm's Go SDK (v4.2.3 in 0.2.2): `Chart.load` reads a chart directory with
its unpacked subcharts, `Chart.render(values, name=, namespace=, is_install=True)` coalesces the
values with the chart's defaults, checks them against every `values.schema.json` (the chart's and
its subcharts') and runs the templates, so a `required` or `fail` in a template refuses the values
as `helm install` would. No cluster is contacted: `lookup` finds nothing, and the Capabilities are
Helm's defaults (https://pypi.org/project/helm-python-sdk/0.2.2/;
https://helm.sh/docs/chart_template_guide/function_list/#lookup).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python

from offline_plan.helm import documents
from offline_plan.helm.releases import Release

# Helm's annotation for hooks; `test` hooks run only on `helm test`, never on install or upgrade
# (https://helm.sh/docs/topics/charts_hooks/, https://helm.sh/docs/topics/chart_tests/).
HOOK_ANNOTATION = "helm.sh/hook"
TEST_HOOKS = {"test", "test-success"}
_SCHEMA_LINE = re.compile(r"^- at '(?P<pointer>[^']*)': (?P<message>.*)$")
_ADDITIONAL = re.compile(r"additional properties? '(?P<key>[^']+)'")


class HelmReleaseError(ValueError):
    """A release the plan cannot render; the message is one line naming the release (and the key
    where the chart's schema names one). A ValueError, so the plan reports it and exits 2."""


@dataclass
class RenderedRelease:
    release: Release
    objects: list[dict[str, Any]]
    """What the install creates from templates/ (hooks included, test hooks not), in Helm's order."""
    crds: list[dict[str, Any]]
    """The CRDs of the chart's (and its enabled subcharts') crds/ folders, installed first."""
    hooks: list[dict[str, Any]] = field(default_factory=list)
    """The objects among `objects` that are install hooks."""


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _schema_problems(message: str) -> list[str]:
    """Helm's schema report ("chart:\\n- at '/a/b': why") as "key a.b: why" items."""
    problems = []
    for line in message.splitlines():
        m = _SCHEMA_LINE.match(line.strip())
        if not m:
            continue
        key = ".".join(p for p in m["pointer"].split("/") if p)
        extra = _ADDITIONAL.search(m["message"])
        if extra:
            key = f"{key}.{extra['key']}" if key else extra["key"]
        problems.append(f"key {key or '(root)'}: {m['message']}")
    return problems


def _condition_enabled(condition: str, values: dict[str, Any]) -> bool:
    """Helm's dependency `condition`: the first of its comma-separated paths that holds a bool
    decides; none does, the subchart is enabled (https://helm.sh/docs/topics/charts/#tags-and-condition-fields-in-dependencies)."""
    for path in condition.split(","):
        node: Any = values
        for part in path.strip().split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool):
            return node
    return True


def _enabled_subcharts(chart: helm_python.Chart, merged: dict[str, Any]) -> set[str]:
    enabled = set()
    for dep in chart.metadata.get("dependencies") or []:
        name = dep.get("alias") or dep.get("name")
        if _condition_enabled(str(dep.get("condition") or ""), merged):
            enabled.add(str(name))
    return enabled


def _crd_objects(chart: helm_python.Chart, merged: dict[str, Any]) -> list[dict[str, Any]]:
    """crds/ of the chart and of its enabled direct subcharts (Helm installs only those; a
    subchart's own subcharts are taken as enabled, which no chart here depends on)."""
    enabled = _enabled_subcharts(chart, merged)
    objects = []
    for crd in chart.crds:
        parts = crd["filename"].split("/")
        if len(parts) > 3 and parts[1] == "charts" and parts[2] not in enabled:
            continue
        objects += documents.objects(crd["data"])
    return objects


def render(release: Release, charts_dir: Path | None = None) -> RenderedRelease:
    directory = release.chart_dir(charts_dir)
    where = f"{release.label}"
    if not directory.is_dir():
        raise HelmReleaseError(
            f"{where}: no chart directory {directory.parent.name}/{directory.name}; add the chart at that "
            "version (charts/SOURCES.md says how)"
        )
    try:
        chart = helm_python.Chart.load(directory)
    except helm_python.HelmError as err:
        raise HelmReleaseError(f"{where}: the chart does not load: {_one_line(str(err))}") from None
    # A registry tag may drop the "v" its chart's own version keeps: LWS's promoted tag is `0.10.0`
    # for a chart whose Chart.yaml says `v0.10.0` (charts/SOURCES.md, lws-0.10.0); both name one chart.
    if chart.version.removeprefix("v") != release.version.removeprefix("v"):
        raise HelmReleaseError(
            f"{where}: {directory.name}/Chart.yaml says version {chart.version}, not {release.version}"
        )
    try:
        rendered = chart.render(release.values, name=release.name, namespace=release.namespace, is_install=True)
    except helm_python.HelmValuesError as err:
        problems = _schema_problems(str(err)) or [_one_line(str(err))]
        raise HelmReleaseError(f"{where}: values refused by the chart's schema: {'; '.join(problems)}") from None
    except helm_python.HelmError as err:
        raise HelmReleaseError(f"{where}: the chart refuses the values: {_one_line(str(err))}") from None
    objects: list[dict[str, Any]] = []
    hooks: list[dict[str, Any]] = []
    for template, text in rendered.items():
        if not template.endswith((".yaml", ".yml", ".json")):
            continue  # NOTES.txt and the like: shown by helm, never applied
        for doc in documents.objects(text):
            hook = ((doc.get("metadata") or {}).get("annotations") or {}).get(HOOK_ANNOTATION)
            kinds = {h.strip() for h in str(hook).split(",")} if hook else set()
            if kinds and kinds <= TEST_HOOKS:
                continue
            objects.append(doc)
            if kinds:
                hooks.append(doc)
    return RenderedRelease(release, objects, _crd_objects(chart, chart.merge_values(release.values)), hooks)
