"""Transcribe the value keys the program sets on an add-on chart, with their line in the chart's values.yaml.

    python tools/helm_value_keys.py CHART /path/to/values.yaml   (prints YAML for the fixture)

The add-on charts' values files are not copied into the repository; tests/fixtures/helm/
addon-value-keys.yaml lists, per chart, only the key paths the program sets, each with the line
number and the shape of the default in the upstream file at the pinned tag. On a chart bump: fetch
the new values.yaml (the URL is `values_url` of the chart in components/addons), run this for the
chart, and replace its entry. The program's values are taken from every variant it produces
(with and without a system pool node selector, in every variant of the add-on).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.addons.catalog import HelmChart
from components.addons.needs import CATALOG, VARIANTS


def charts_by_name(name: str) -> list[HelmChart]:
    """Every form of the chart the program installs (an add-on's variants set more keys)."""
    found = [
        step
        for addon in CATALOG + VARIANTS
        for step in addon.steps
        if isinstance(step, HelmChart) and step.chart.rsplit("/", 1)[-1] == name
    ]
    if not found:
        raise SystemExit(f"no add-on chart named {name}")
    return found


def key_paths(values: dict[str, Any], upstream: dict[str, tuple[int, str, Any]], prefix: str = "") -> list[str]:
    """The paths the program sets, not descending below a key the chart leaves open ({} / [] / null)."""
    out = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        out.append(path)
        if isinstance(value, dict) and value and upstream.get(path, (0, "mapping", None))[1] == "mapping":
            out += key_paths(value, upstream, path)
    return out


def upstream_keys(path: Path) -> dict[str, tuple[int, str, Any]]:
    """key path -> (1-based line, shape, default) for every key of the upstream values.yaml."""
    found: dict[str, tuple[int, str, Any]] = {}

    def walk(node: yaml.Node | None, prefix: str) -> None:  # None: an empty values.yaml
        if not isinstance(node, yaml.MappingNode):
            return
        for key_node, value_node in node.value:
            dotted = f"{prefix}.{key_node.value}" if prefix else key_node.value
            if isinstance(value_node, yaml.MappingNode) and value_node.value:
                shape, default = "mapping", None
            elif isinstance(value_node, yaml.ScalarNode) and value_node.tag != "tag:yaml.org,2002:null":
                shape, default = "scalar", yaml.safe_load(yaml.serialize(value_node))
            else:
                shape, default = "open", None  # {} / [] / null: the chart leaves it to the user
            found[dotted] = (key_node.start_mark.line + 1, shape, default)
            walk(value_node, dotted)

    walk(yaml.compose(path.read_text()), "")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chart")
    parser.add_argument("values_yaml", type=Path)
    args = parser.parse_args()
    charts = charts_by_name(args.chart)
    chart = charts[0]
    upstream = upstream_keys(args.values_yaml)
    paths: list[str] = []
    for form in charts:
        for selector in (None, {"example.io/pool": "system"}):
            for p in key_paths(form.values(selector), upstream):
                if p not in paths:
                    paths.append(p)
    keys = {}
    for p in paths:
        if p not in upstream:
            raise SystemExit(f"{chart.chart} {chart.version}: {p} is not a key of {args.values_yaml}")
        line, shape, default = upstream[p]
        keys[p] = {"line": line, "shape": shape, **({"default": default} if shape == "scalar" else {})}
    entry = {
        args.chart: {
            "version": chart.version,
            "source": chart.values_url,
            "sha256": hashlib.sha256(args.values_yaml.read_bytes()).hexdigest(),
            "keys": keys,
        }
    }
    print(yaml.safe_dump(entry, sort_keys=False), end="")


if __name__ == "__main__":
    main()
