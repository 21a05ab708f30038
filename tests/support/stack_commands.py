"""What the real-vLLM tests check from the stacks: `vllm serve` command lines and metric names.

By default both come from the program itself: the dev and prod stacks (and a multi-node variant of
prod, so the LeaderWorkerSet leader's command line is checked too) evaluated under the mock runtime.
Reading YAML from a folder (`build=`) is kept for manifests written by `make plan` or by hand.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import yaml

from common import contract
from components.verification import job as verification_job
from tests.support import paths
from tests.support.committed import committed_stack

ROOT = paths.ROOT
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
    # A multi-node leader: `sh -c 'ray start ... && exec vllm serve "$@"' <name>` with the flags as args.
    if len(command) >= 3 and command[1] == "-c" and 'exec vllm serve "$@"' in command[2]:
        return args
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


def serve_lines_from_objects(objects: list[Any], model_path: str, source: str) -> list[tuple[str, list[str]]]:
    """(name, argv after `vllm serve`) for every vLLM container in these Kubernetes objects.

    Works on any list of manifest dicts, e.g. the program's evaluated objects, not only files.
    """
    found: list[tuple[str, list[str]]] = []
    for doc in objects:
        meta = doc.get("metadata", {}) if isinstance(doc, dict) else {}
        for container in _containers(doc):
            args = serve_args(container)
            if args is None:
                continue
            name = f"{source}:{doc.get('kind')}/{meta.get('name')}/{container.get('name')}"
            if any(name == seen for seen, _ in found):
                name = f"{name}#{len(found)}"  # names key the verdicts, so keep them unique
            found.append((name, swap_model(args, model_path)))
    return found


# The stacks whose command lines and queries are checked, and the override that makes prod's 70B
# model span two nodes (tensor parallelism inside each node, two pipeline stages across them).
STACKS = ("dev", "prod")
MULTI_NODE_70B = {
    "repo": "meta-llama/Llama-3.3-70B-Instruct",
    "revision": "38ff4e01a70559264c95945aa04b900a11e68422",
    "name": "llama-3-3-70b-two-nodes",
    "gated": True,
    "pool": "h100",
    "tensorParallelSize": 8,
    "pipelineParallelSize": 2,
    "maxModelLen": 32768,
}


def stack_objects() -> dict[str, list[dict]]:
    """Kubernetes objects the program emits, per stack (evaluated once per test session)."""
    if not _STACK_OBJECTS:
        from offline_plan.mock_runtime import evaluate_stack
        from tests.support.stack_variants import ADAPTERS, variant

        for stack in STACKS:
            _STACK_OBJECTS[stack] = committed_stack(stack).kubernetes_objects
        _STACK_OBJECTS["prod-multi-node"] = evaluate_stack(
            "prod", overrides={"models": [MULTI_NODE_70B]}
        ).kubernetes_objects
        # prod with LoRA adapters (tests/fixtures/adapters): the --lora-modules line too.
        _STACK_OBJECTS["prod-adapters"] = variant(ADAPTERS).kubernetes_objects
    return _STACK_OBJECTS


_STACK_OBJECTS: dict[str, list[dict]] = {}


def collect_vllm_serve_argv(model_path: str, build: pathlib.Path | None = None) -> list[tuple[str, list[str]]]:
    """(name, argv after `vllm serve`) for every vLLM container the stacks generate.

    With `build`, from the YAML files under build/<stack>/manifests/ instead of the program.
    """
    found = []
    if build is not None:
        for path in manifest_files(build):
            found += serve_lines_from_objects(list(_documents(path)), model_path, str(path.relative_to(build)))
        return found
    for stack, objects in stack_objects().items():
        found += serve_lines_from_objects(objects, model_path, stack)
    return found


def collect_metric_reference_texts() -> dict[str, str]:
    """Text of every object the stacks emit, by name: PrometheusRules, dashboards, ServiceMonitors,
    ScaledObjects and HPAs among them (names are found by pattern, so other objects are harmless).

    The verification Job's ConfigMap is left out: it ships the endpoint tools' source, whose table of
    names older releases used (common/engine_metrics.py) is code that recognises them, not a query."""
    return {
        f"{stack}:{obj['kind']}/{obj['metadata'].get('name')}": yaml.safe_dump(obj)
        for stack, objects in stack_objects().items()
        for obj in objects
        if not (
            obj["kind"] == "ConfigMap"
            and (obj["metadata"].get("labels") or {}).get(contract.LABEL_COMPONENT) == verification_job.COMPONENT
        )
    }


def promql_in_object(obj: dict) -> list[str]:
    """Every PromQL expression in one manifest: rules, KEDA triggers, KServe metrics, dashboard panels."""
    import json

    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "PrometheusRule":
        return [r["expr"] for g in spec.get("groups", []) for r in g.get("rules", [])]
    if kind == "ScaledObject":
        return [t["metadata"]["query"] for t in spec.get("triggers", []) if t.get("type") == "prometheus"]
    if kind == "InferenceService":
        metrics = (spec.get("predictor") or {}).get("autoScaling", {}).get("metrics", [])
        return [m["external"]["metric"]["query"] for m in metrics if m.get("type") == "External"]
    if kind == "ConfigMap" and (obj.get("metadata", {}).get("labels") or {}).get("grafana_dashboard") == "1":
        boards = [json.loads(text) for text in (obj.get("data") or {}).values()]
        return [t["expr"] for board in boards for panel in board["panels"] for t in panel["targets"]]
    return []


def collect_promql_expressions() -> list[tuple[str, str]]:
    """(source, expression) for every PromQL expression the stacks emit."""
    return [
        (f"{stack}:{obj['kind']}/{obj['metadata'].get('name')}", expr)
        for stack, objects in stack_objects().items()
        for obj in objects
        for expr in promql_in_object(obj)
    ]


def collect_metric_reference_files(build: pathlib.Path = BUILD) -> list[pathlib.Path]:
    """Manifest files under a build folder (for manifests written by `make plan` or by hand)."""
    return manifest_files(build)
