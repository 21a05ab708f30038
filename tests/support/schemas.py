"""Validate what the program emits against the real schemas.

Built-in kinds go through `kubernetes-validate` in strict mode (unknown fields are errors, as with
`kubectl apply --validate=strict`). Custom resources go through their upstream CRD's
openAPIV3Schema (tests/fixtures/crds, provenance in tests/fixtures/SOURCES.md), made strict the
same way: an object that declares `properties` and neither `additionalProperties` nor
`x-kubernetes-preserve-unknown-fields` rejects fields it does not declare, where the API server
would reject them under strict field validation.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.support import paths

FIXTURES = paths.FIXTURES
CRD_DIR = FIXTURES / "crds"
KUBERNETES_VERSION = "1.33.0"


class SchemaError(AssertionError):
    pass


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict JSON schema, for every CRD under fixtures/crds."""
    crds = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        if path.name.endswith("_patch.yaml"):
            continue
        crd = yaml.safe_load(path.read_text())
        patch = CRD_DIR / "scaledobject_patch.yaml"
        if crd["spec"]["names"]["kind"] == "ScaledObject" and patch.exists():
            _apply_json_patch(crd, yaml.safe_load(patch.read_text()))
        crds.append(crd)
    return schemas_of(crds)


def schemas_of(crds: list[dict]) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict JSON schema for each served version of these CRD objects (the
    CRDs a stack's charts install, for the objects those charts render)."""
    schemas: dict[tuple[str, str], dict] = {}
    for crd in crds:
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
            schemas[(f"{group}/{version['name']}", kind)] = _strict(copy.deepcopy(schema))
    return schemas


def _apply_json_patch(doc: dict, ops: list[dict]) -> None:
    for op in ops:
        assert op["op"] == "add", op
        *parents, leaf = op["path"].strip("/").split("/")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[leaf] = op["value"]


def _strict(schema: dict) -> dict:
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-int-or-string"):
            schema.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
            # apiVersion/kind/metadata are checked by the API server, not by the CRD's schema.
        for key, value in list(schema.items()):
            if key in ("properties", "patternProperties"):
                for sub in value.values():
                    _strict(sub)
            elif key in ("items", "additionalProperties", "not"):
                if isinstance(value, dict):
                    _strict(value)
            elif key in ("allOf", "anyOf", "oneOf"):
                for sub in value:
                    _strict(sub)
    return schema


def known_custom_kinds() -> set[tuple[str, str]]:
    return set(_crd_schemas())


def validate_object(obj: dict, custom: dict[tuple[str, str], dict] | None = None) -> None:
    """Raise SchemaError naming the object and the first problem; pass silently when valid.

    `custom` (from `schemas_of`) takes precedence over the fixtures' CRDs: the schemas of the CRDs
    that will really be installed next to the object."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    name = (obj.get("metadata") or {}).get("name", "?")
    schema = (custom or {}).get((api_version, kind)) or _crd_schemas().get((api_version, kind))
    if schema is not None:
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        body_schema = dict(schema)
        body_schema["properties"] = {
            k: v for k, v in schema.get("properties", {}).items() if k not in ("apiVersion", "kind", "metadata")
        }
        errors = sorted(jsonschema.Draft7Validator(body_schema).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            raise SchemaError(f"{kind}/{name}: {'.'.join(map(str, e.path)) or '(root)'}: {e.message}")
        return
    if "." in (api_version or "").split("/")[0] and not api_version.startswith(
        (
            "apps/",
            "batch/",
            "policy/",
            "networking.k8s.io/",
            "rbac.authorization.k8s.io/",
            "autoscaling/",
            "storage.k8s.io/",
            "scheduling.k8s.io/",
            "coordination.k8s.io/",
            "apiextensions.k8s.io/",
            "admissionregistration.k8s.io/",
            "apiregistration.k8s.io/",
        )
    ):
        raise SchemaError(
            f"{kind}/{name}: no CRD schema for {api_version} in tests/fixtures/crds; add the upstream CRD"
        )
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        path = ".".join(map(str, err.path)) or "(root)"
        raise SchemaError(f"{kind}/{name}: {path}: {err.message}") from None


def validate_all(objects: list[dict]) -> None:
    problems = []
    for obj in objects:
        try:
            validate_object(obj)
        except SchemaError as err:
            problems.append(str(err))
    if problems:
        raise SchemaError("\n".join(problems))
