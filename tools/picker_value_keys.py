"""Transcribe the `router.*` value keys the program sets on the endpoint picker chart, with their line
in the library chart's values.yaml (the gateway chart's own values.yaml is copied whole).

    python tools/picker_value_keys.py /path/to/routerlib/values.yaml   (prints the fixture)

llm-d-router-gateway depends on the library chart `routerlib` under the alias `router`
(config/charts/llm-d-router-gateway/Chart.yaml), so everything under `router.` is a routerlib key.
The library's values.yaml was read from a snapshot that may not be committed, so
tests/fixtures/helm/llm-d-router-routerlib-value-keys.yaml lists only the keys the program sets, each
with its line and the shape of its default. On a chart bump: `git show <tag>:config/charts/
routerlib/values.yaml > values.yaml` from llm-d/llm-d-router, run this, replace the fixture.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.entrance import picker
from tools.helm_value_keys import key_paths, upstream_keys

# Keys a template reads although values.yaml only shows them in a comment: path -> where it is read.
TEMPLATE_ONLY = {
    "modelServers.matchLabels": (
        f"llm-d/llm-d-router@{picker.VERSION}:config/charts/routerlib/templates/_inferencepool.yaml:23-24"
    ),
}


def variants() -> list[dict]:
    """The picker values the program produces, with and without monitoring and a system pool."""
    out = []
    for monitoring in (False, True):
        for selector in (None, {"example.io/pool": "system"}):
            spec = picker.PickerSpec(
                release="m",
                namespace="ns",
                server_labels={"a": "b"},
                replicas=2,
                failure_mode="FailOpen",
                monitoring=monitoring,
                monitoring_labels={"release": "x"},
                system_node_selector=selector,
            )
            out.append(picker.picker_values(spec)["router"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("values_yaml", type=Path)
    args = parser.parse_args()
    upstream = upstream_keys(args.values_yaml)
    for path in TEMPLATE_ONLY:
        upstream.setdefault(path, (0, "open", None))
    paths: list[str] = []
    for values in variants():
        for p in key_paths(values, upstream):
            if p not in paths:
                paths.append(p)
    keys = {}
    for p in paths:
        if p not in upstream:
            raise SystemExit(f"routerlib {picker.VERSION}: {p} is not a key of {args.values_yaml}")
        line, shape, default = upstream[p]
        entry = {"line": line, "shape": shape, **({"default": default} if shape == "scalar" else {})}
        if p in TEMPLATE_ONLY:
            entry = {"template": TEMPLATE_ONLY[p], "shape": "open"}
        keys[p] = entry
    print(
        yaml.safe_dump(
            {
                "routerlib": {
                    "version": picker.VERSION,
                    "source": picker.LIBRARY_VALUES_URL,
                    "sha256": hashlib.sha256(args.values_yaml.read_bytes()).hexdigest(),
                    "keys": keys,
                }
            },
            sort_keys=False,
        ),
        end="",
    )


if __name__ == "__main__":
    main()
