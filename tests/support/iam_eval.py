"""Small evaluators for the access rules the cloud layer writes, so tests check what a request
would be allowed to do rather than how a document happens to be spelled.

- AWS: identity-policy evaluation (explicit Deny wins, else any Allow), with the wildcard and
  condition operators our documents use (StringEquals, StringLike, Bool).
- GCS: the CEL condition of a bucket IAM binding, evaluated for an object or listing request,
  plus the permissions of the predefined roles we grant (Cloud Storage IAM roles reference).
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _condition_holds(condition: dict, context: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        for key, expected in tests.items():
            if key not in context:
                return False
            actual = context[key]
            values = _as_list(expected)
            if operator == "StringEquals" and actual not in values:
                return False
            if operator == "StringLike" and not any(fnmatchcase(actual, v) for v in values):
                return False
            if operator == "Bool" and str(actual).lower() not in [str(v).lower() for v in values]:
                return False
            if operator not in ("StringEquals", "StringLike", "Bool"):
                raise AssertionError(f"evaluator does not know condition operator {operator}")
    return True


def aws_allows(policy: dict, action: str, resource: str, context: dict[str, str] | None = None) -> bool:
    context = context or {}
    allowed = False
    for statement in policy["Statement"]:
        if not any(fnmatchcase(action, a) for a in _as_list(statement["Action"])):
            continue
        if not any(fnmatchcase(resource, r) for r in _as_list(statement["Resource"])):
            continue
        if not _condition_holds(statement.get("Condition", {}), context):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


# Permissions of the predefined Cloud Storage roles that matter here
# (https://cloud.google.com/storage/docs/access-control/iam-roles).
GCS_ROLE_PERMISSIONS: dict[str, set[str]] = {
    "roles/storage.objectCreator": {
        "storage.objects.create",
        "storage.multipartUploads.create",
        "storage.multipartUploads.abort",
        "storage.multipartUploads.listParts",
        "storage.managedFolders.create",
    },
    "roles/storage.objectViewer": {
        "storage.objects.get",
        "storage.objects.list",
        "storage.folders.get",
        "storage.folders.list",
        "storage.managedFolders.get",
        "storage.managedFolders.list",
    },
    "roles/storage.objectUser": {
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.get",
        "storage.objects.list",
        "storage.objects.update",
        "storage.objects.restore",
        "storage.multipartUploads.create",
        "storage.multipartUploads.abort",
        "storage.multipartUploads.listParts",
    },
    "roles/storage.objectAdmin": {
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.get",
        "storage.objects.list",
        "storage.objects.update",
        "storage.objects.getIamPolicy",
        "storage.objects.setIamPolicy",
    },
}

_CEL_TOKENS = re.compile(
    r'\s*(\|\||&&|==|\(|\)|,|"[^"]*"|resource\.name|resource\.type|\.startsWith|api\.getAttribute)\s*'
)


def cel_holds(
    expression: str, resource_name: str, resource_type: str, attributes: dict[str, str] | None = None
) -> bool:
    """Evaluate the subset of CEL our conditions use; anything else is refused, not guessed."""
    tokens = [t for t in _CEL_TOKENS.split(expression) if t.strip()]
    if "".join(_CEL_TOKENS.findall(expression)).replace(" ", "") != expression.replace(" ", ""):
        raise AssertionError(f"condition uses CEL the evaluator does not know: {expression}")
    python = []
    for token in tokens:
        token = token.strip()
        python.append(
            {
                "||": " or ",
                "&&": " and ",
                "resource.name": "r_name",
                "resource.type": "r_type",
                ".startsWith": ".startswith",
                "api.getAttribute": "api_get",
            }.get(token, token)
        )
    attributes = attributes or {}
    scope = {"r_name": resource_name, "r_type": resource_type, "api_get": attributes.get}
    return bool(eval("".join(python), {"__builtins__": {}}, scope))


def gcs_allows(
    bindings: list[dict],
    member: str,
    permission: str,
    bucket: str,
    obj: str | None = None,
    list_prefix: str | None = None,
) -> bool:
    """Is `permission` granted to `member` by the bucket's (conditional) IAM bindings?

    An object request names `obj`; a listing names `list_prefix` (checked on the bucket).
    """
    if obj is not None:
        name, rtype, attrs = f"projects/_/buckets/{bucket}/objects/{obj}", "storage.googleapis.com/Object", {}
    else:
        name, rtype = f"projects/_/buckets/{bucket}", "storage.googleapis.com/Bucket"
        attrs = {"storage.googleapis.com/objectListPrefix": list_prefix or ""}
    for binding in bindings:
        if binding["member"] != member or permission not in GCS_ROLE_PERMISSIONS[binding["role"]]:
            continue
        condition = binding.get("condition")
        if condition is None or cel_holds(condition["expression"], name, rtype, attrs):
            return True
    return False
