"""Issue 26 point 5: the CRDs the stack's charts install serve every apiVersion the program's own
custom resources use (a CRD version with `served: false` is refused by the API server,
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definition-versioning/)."""

from __future__ import annotations

from typing import Any

from offline_plan.helm import RenderedRelease


def installed_crds(rendered: list[RenderedRelease]) -> list[dict[str, Any]]:
    return [o for r in rendered for o in [*r.crds, *r.objects] if o.get("kind") == "CustomResourceDefinition"]


def unserved_versions(objects: list[dict[str, Any]], crds: list[dict[str, Any]]) -> tuple[list[str], int]:
    """(problems, how many objects a chart's CRD covers): objects of a kind a chart installs whose
    apiVersion that CRD does not serve."""
    served: dict[tuple[str, str], set[str]] = {}
    for crd in crds:
        spec = crd["spec"]
        key = (spec["group"], spec["names"]["kind"])
        served.setdefault(key, set()).update(v["name"] for v in spec["versions"] if v.get("served"))
    problems, covered = [], 0
    for obj in objects:
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        key = (group, str(obj.get("kind")))
        if key not in served:
            continue
        covered += 1
        if version not in served[key]:
            name = (obj.get("metadata") or {}).get("name")
            problems.append(f"{obj['kind']}/{name}: {obj['apiVersion']} is not served (served: {sorted(served[key])})")
    return problems, covered
