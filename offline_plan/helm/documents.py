"""A rendered template's text as the objects Helm would send, split and typed the way Helm does.

Helm splits a rendered file on `(?:^|\\s*\\n)---\\s*` (helm/helm pkg/releaseutil/manifest.go,
`sep` and SplitManifests, at commit 145d12f82fc7a2e39a17713340825686b661e0a1), so a template may
write `---# comment`, which a YAML parser reads as one scalar. Each piece is then decoded by
sigs.k8s.io/yaml (YAML 1.2 core types, via go-yaml): a plain `=` is the string "=", where PyYAML's
YAML 1.1 resolver reads it as the `value` tag and refuses it (the Prometheus Operator CRDs' enum
of label-matcher operators has one).
"""

from __future__ import annotations

import functools
import pickle
import re
from typing import Any

import yaml

_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
_VALUE_TAG = "tag:yaml.org,2002:value"


class _HelmYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe loading, with `=` read as a string."""


_HelmYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _VALUE_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def objects(text: str) -> list[dict[str, Any]]:
    """The objects of one rendered file; empty documents (a disabled template) are dropped.

    Parsing is most of a render's time (a CRD chart renders megabytes), so a text seen before in
    this process is not parsed again; each caller gets its own copy."""
    return pickle.loads(_parsed(text))  # our own bytes, made just below


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> bytes:
    found = []
    for piece in _SEPARATOR.split(text.strip()):
        if not piece.strip():
            continue
        doc = yaml.load(piece, Loader=_HelmYamlLoader)
        if isinstance(doc, dict):
            found.append(doc)
    return pickle.dumps(found)
