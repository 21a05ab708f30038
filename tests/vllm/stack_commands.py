"""What the real-vLLM tests check from the stacks: `vllm serve` command lines and metric names.

For now both read what the offline plan command writes under build/<stack>/manifests/ (YAML), if it
is there. The lead wires these to the program's output; keep the return shapes.
"""

from __future__ import annotations

import pathlib
from typing import Any, Iterator

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
# The upstream image's entrypoint is `vllm serve`, so a container of it with only `args` is a
# `vllm serve` command line too.
VLLM_IMAGE_PREFIX = "vllm/vllm-openai"


def manifest_files(build: pathlib.Path = BUILD) -> list[pathlib.Path]:
    return sorted(p for p in build.glob("*/manifests/**/*") if p.suffix in (".yaml", ".yml") and p.is_file())


def _documents(path: pathlib.Path) -> Iterator[Any]:
    with path.open() as handle:
        yield from (doc for doc in yaml.safe_load_all(handle) if doc is not None)


def _containers(node: Any) -> Iterator[dict]:
    """Every container spec anywhere in a manifest (Deployments, Pods, Jobs, CRDs alike)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def serve_args(container: dict) -> list[str] | None:
    """The arguments after `vllm serve` for a container that runs it, else None."""
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    full = command + args
    if full[:2] == ["vllm", "serve"]:
        return full[2:]
    if not command and str(container.get("image", "")).startswith(VLLM_IMAGE_PREFIX):
        return args
    return None


def swap_model(args: list[str], model_path: str) -> list[str]:
    """The same arguments with the model (positional first argument or --model) replaced."""
    out = list(args)
    if out and not out[0].startswith("-"):
        out[0] = model_path
    for i, arg in enumerate(out):
        if arg == "--model" and i + 1 < len(out):
            out[i + 1] = model_path
        elif arg.startswith("--model="):
            out[i] = f"--model={model_path}"
    return out


def collect_vllm_serve_argv(model_path: str, build: pathlib.Path = BUILD) -> list[tuple[str, list[str]]]:
    """(name, argv after `vllm serve`) for every vLLM container the stacks generate."""
    found = []
    for path in manifest_files(build):
        for doc in _documents(path):
            meta = doc.get("metadata", {}) if isinstance(doc, dict) else {}
            for container in _containers(doc):
                args = serve_args(container)
                if args is None:
                    continue
                name = f"{path.relative_to(build)}:{doc.get('kind')}/{meta.get('name')}/{container.get('name')}"
                if any(name == seen for seen, _ in found):
                    name = f"{name}#{len(found)}"  # names key the verdicts, so keep them unique
                found.append((name, swap_model(args, model_path)))
    return found


def collect_metric_reference_files(build: pathlib.Path = BUILD) -> list[pathlib.Path]:
    """Files whose vLLM metric names must exist: PrometheusRule, dashboards, ServiceMonitor, KEDA/HPA.

    For now every manifest under build/*/manifests (the names are found by pattern, so files
    without any are harmless).
    """
    return manifest_files(build)
