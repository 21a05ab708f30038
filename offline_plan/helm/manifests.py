"""Rendered objects next to the program's own, in build/<stack>/manifests/.

Each file is named `helm.<release namespace>.<release name>.<Kind>-<namespace>-<name>.yaml`, so
a listing groups a release's objects and tells them from the program's own files (which start with
their kind), and the objects themselves stay exactly what Helm renders. CRDs from a chart's
crds/ folder are written too: Helm installs them before the templates
(https://helm.sh/docs/chart_best_practices/custom_resource_definitions/).

A Secret's values are written as a marker, keys kept: a chart may generate one at render time
(Grafana's admin password is `randAlphaNum` unless set), and no secret value belongs in a plan file;
for the same reason a pod template's `checksum/secret*` annotations are written as the marker.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from offline_plan.helm.engine import RenderedRelease
from offline_plan.mock_runtime import REDACTED
from policies.waivers import FILE_PREFIX, release_prefix
from safe_yaml.go_reading import dump_for_go

# The checker reads a rendered object's release from its file name (policies/waivers.py), so both
# sides take the name from there.
PREFIX = FILE_PREFIX


def _part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text)


def filename(rendered: RenderedRelease, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    parts = [str(obj.get("kind", "Object")), str(meta.get("namespace") or ""), str(meta.get("name") or "unnamed")]
    release = rendered.release
    return release_prefix(release.namespace, release.name) + "-".join(_part(p) for p in parts if p) + ".yaml"


# Pod-template annotations that hash a Secret's values so its pods roll when it changes
# (kube-prometheus-stack's Grafana `checksum/secret`): they change with every generated password,
# so a plan showing them would differ from run to run, and they are derived from secret values.
SECRET_CHECKSUM_PREFIX = "checksum/secret"


def _without_secret_checksums(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    metadata = template.get("metadata") if isinstance(template, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict) or not any(str(k).startswith(SECRET_CHECKSUM_PREFIX) for k in annotations):
        return obj
    assert isinstance(spec, dict) and isinstance(template, dict) and isinstance(metadata, dict)
    masked = {k: REDACTED if str(k).startswith(SECRET_CHECKSUM_PREFIX) else v for k, v in annotations.items()}
    return {**obj, "spec": {**spec, "template": {**template, "metadata": {**metadata, "annotations": masked}}}}


def shown(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a plan file may show it: a Secret's values, and the pod annotations that
    hash them, replaced by a marker."""
    if obj.get("kind") != "Secret":
        return _without_secret_checksums(obj)
    return {
        **obj,
        **{key: dict.fromkeys(obj[key], REDACTED) for key in ("data", "stringData") if isinstance(obj.get(key), dict)},
    }


def write(releases: list[RenderedRelease], directory: Path) -> list[Path]:
    """Write every release's objects (CRDs first, as Helm installs them) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for rendered in releases:
        for obj in [*rendered.crds, *rendered.objects]:
            path = directory / filename(rendered, obj)
            n = 2
            while path in written:
                path = path.with_name(f"{path.stem}-{n}.yaml")
                n += 1
            path.write_text(dump_for_go(shown(obj)))
            written.append(path)
    return written
