"""What a second `pulumi up` after an everyday change creates, updates, replaces and deletes.

`classify(before, after)` compares two evaluations of one stack resource by resource (by URN) the
way the engine does: a resource only in `after` is created, only in `before` deleted; one whose
inputs changed is replaced when a changed property is one its provider cannot update in place, else
updated. Which properties those are is data, `replace_on_change.json`, each entry with its source:
pulumi-kubernetes' forceNew table (provider/pkg/provider/diff.go), its Helm Release diff
(helm_release.go), and the cloud providers' replace-on-change inputs for the types this program
creates. The resource option `replaceOnChanges` adds paths, `ignoreChanges` removes them.

`weekly_changes(config)` are the changes a user makes every week (a new model revision, a new vLLM
release, more replicas, a new LoRA adapter), each as overrides of the config a stack ran with;
`replaced_section` is plan.md's "What a change replaces". A new revision or adapter needs Hub
metadata no machine here can fetch: the evaluation reads a stand-in (`stand_ins`), the committed
metadata of the current revision under a marked stand-in SHA, so the plan shows what a new
commit does to the graph (the revision string moves), not a real commit.

This is not `pulumi preview`: values a cloud computes are placeholders in both evaluations, so a
change that only shows in them is invisible here.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from offline_plan.mock_runtime import PROGRAM, Evaluation, RecordedResource, evaluate
from stack_config import PROJECT

TABLE = Path(__file__).with_name("replace_on_change.json")
ChangeKind = Literal["create", "delete", "update", "replace", "same"]

# Stand-in commits for changes that need Hub metadata (see the module docstring): recognisable, and
# never a real SHA a reader could mistake for one.
STAND_IN_REVISION = "5" * 40
STAND_IN_ADAPTER = {"name": "weekly-adapter", "repo": "llm-serving-stand-ins/weekly-lora", "revision": "6" * 40}
# A PEFT LoRA adapter_config.json (peft LoraConfig's field names) on the base model.
_STAND_IN_ADAPTER_CONFIG = {
    "peft_type": "LORA",
    "r": 16,
    "lora_alpha": 32,
    "bias": "none",
    "target_modules": ["q_proj", "v_proj"],
}


@dataclass(frozen=True)
class Change:
    urn: str
    type: str
    name: str
    kind: ChangeKind
    # The changed input paths (".spec.template.spec.containers[0].image").
    paths: tuple[str, ...] = ()
    # For a replace: the replace-on-change properties the change touched (".spec.template"), or
    # "unknown" entries for cloud properties the table does not classify.
    forced: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


@cache
def replace_table() -> dict[str, dict[str, Any]]:
    """Key (type token or `k8s:<group>/<kind>`) -> {"paths": [...], "source": "...", ...}."""
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    return dict(data["entries"])


def _k8s_key(r: RecordedResource) -> str:
    api = str(r.inputs.get("apiVersion", ""))
    group = api.split("/", 1)[0] if "/" in api else "core"
    return f"k8s:{group}/{r.inputs.get('kind', '')}"


def _dotted(p: str) -> str:
    return p if p.startswith(".") else f".{p}"


def _entries(r: RecordedResource) -> list[dict[str, Any]]:
    table = replace_table()
    if r.is_kubernetes_object:
        return [e for e in (table.get("k8s:*"), table.get(_k8s_key(r))) if e]
    entry = table.get(r.type)
    return [entry] if entry else []


_MISSING = object()


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {p: v for k, item in value.items() for p, v in _leaves(item, f"{path}.{k}").items()}
    if isinstance(value, list) and value:
        return {p: v for i, item in enumerate(value) for p, v in _leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def changed_paths(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    a, b = _leaves(old), _leaves(new)
    return sorted(p for p in set(a) | set(b) if a.get(p, _MISSING) != b.get(p, _MISSING))


def _normal(path: str) -> str:
    """List indices as `[*]`, as pulumi-kubernetes spells its container paths."""
    return re.sub(r"\[\d+\]", "[*]", path)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _forced(r: RecordedResource, paths: list[str]) -> tuple[list[str], list[str]]:
    """The replace-on-change properties among `paths`, and the sources that say so."""
    entries = _entries(r)
    forced = [_dotted(p) for e in entries for p in e["paths"]] + [_dotted(p) for p in r.replace_on_changes]
    hits = sorted({f for p in paths for f in forced if _under(_normal(p), f)})
    sources = [e["source"] for e in entries if any(_dotted(p) in hits for p in e["paths"])]
    if r.is_kubernetes_object or r.type == "kubernetes:helm.sh/v3:Release":
        return hits, sources
    # A cloud type the table does not cover in full: a property it does not list as updatable in
    # place is assumed to replace, so the plan never claims an update it cannot back.
    complete = bool(entries) and all(e.get("complete") for e in entries)
    updatable = [_dotted(p) for e in entries for p in e.get("updatable", [])]
    if not complete:
        unknown = sorted({p for p in paths if not any(_under(_normal(p), u) for u in [*updatable, *forced])})
        if unknown:
            hits += [f"{p} (unknown)" for p in unknown]
            sources.append("not classified in offline_plan/replace_on_change.json: assumed to replace")
    return hits, sources


def classify(before: Evaluation, after: Evaluation) -> dict[str, Change]:
    old = {r.urn: r for r in before.resources if r.urn and r.read_id is None}
    new = {r.urn: r for r in after.resources if r.urn and r.read_id is None}
    out: dict[str, Change] = {}
    for urn, r in new.items():
        if urn not in old:
            out[urn] = Change(urn, r.type, r.name, "create")
            continue
        ignore = [_dotted(p) for p in r.ignore_changes]
        paths = [p for p in changed_paths(old[urn].inputs, r.inputs) if not any(_under(p, i) for i in ignore)]
        if not paths:
            out[urn] = Change(urn, r.type, r.name, "same")
            continue
        hits, sources = _forced(r, paths)
        kind: ChangeKind = "replace" if hits else "update"
        out[urn] = Change(urn, r.type, r.name, kind, tuple(paths), tuple(hits), tuple(sources))
    for urn, r in old.items():
        if urn not in new:
            out[urn] = Change(urn, r.type, r.name, "delete")
    return out


# --- the weekly changes ------------------------------------------------------------------------


@dataclass(frozen=True)
class WeeklyChange:
    name: str
    what: str
    overrides: dict[str, Any]


def _next_tag(image: str) -> str:
    """The image reference with its patch release one higher: the shape of a new vLLM release."""
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":")
    parts = tag.lstrip("v").split(".")
    parts[-1] = str(int(parts[-1]) + 1)
    return f"{repo}:v{'.'.join(parts)}"


def _room_for_one_more(pools: list[dict[str, Any]], model: dict[str, Any]) -> list[dict[str, Any]]:
    """Room for the extra replica: the model's pool may grow by the nodes one replica spans
    (TP x PP GPUs over the pool's GPUs per node; one node when TP is left to the planner)."""
    out = []
    for p in pools:
        if p.get("name") == model.get("pool"):
            tp = model.get("tensorParallelSize")
            gpus = (tp if isinstance(tp, int) else 1) * int(model.get("pipelineParallelSize", 1))
            per_node = int(p.get("gpusPerNode", 1))
            p = {**p, "maxNodes": int(p.get("maxNodes", 1)) + max(1, -(-gpus // per_node))}
        out.append(p)
    return out


def config_list(config: dict[str, str], key: str) -> list[dict[str, Any]]:
    value = json.loads(config.get(f"{PROJECT}:{key}", "[]"))
    return value if isinstance(value, list) else []


def weekly_changes(config: dict[str, str]) -> list[WeeklyChange]:
    """The four everyday changes, each applied to the first model of `config` (the program's config,
    as the CLI hands it over: `llm-serving:models` a JSON list)."""
    from common import images

    models = config_list(config, "models")
    pools = config_list(config, "pools")
    if not models:
        return []
    first = models[0]
    served = first.get("name") or first["repo"]

    def with_first(**edits: Any) -> list[dict[str, Any]]:
        edited = copy.deepcopy(models)
        edited[0] = {**edited[0], **edits}
        return edited

    autoscaling = first.get("autoscaling") or {}
    scaled: dict[str, Any]
    if autoscaling.get("enabled"):
        low, high = autoscaling.get("minReplicas", 1), autoscaling.get("maxReplicas", 1)
        scaled = {"autoscaling": {**autoscaling, "minReplicas": low + 1, "maxReplicas": high + 1}}
        more = f"autoscaling {low}-{high} -> {low + 1}-{high + 1}"
    else:
        scaled = {"replicas": int(first.get("replicas", 1)) + 1}
        more = f"replicas {first.get('replicas', 1)} -> {scaled['replicas']}"
    image = _next_tag(first.get("image") or images.reference("vllm"))
    adapters = [*first.get("adapters", []), STAND_IN_ADAPTER]
    return [
        WeeklyChange(
            "new model revision",
            f"`{served}` revision -> a new commit (stand-in `{STAND_IN_REVISION[:7]}...`)",
            {"models": with_first(revision=STAND_IN_REVISION)},
        ),
        WeeklyChange(
            "new vLLM release",
            f"`{served}` image -> `{image}` (the next patch tag, as a shape; not looked up)",
            {"models": with_first(image=image)},
        ),
        WeeklyChange(
            "more replicas",
            f"`{served}` {more}, its pool the nodes of one more replica (maxNodes)",
            {"models": with_first(**scaled), "pools": _room_for_one_more(pools, first)},
        ),
        WeeklyChange(
            "new LoRA adapter",
            f"`{served}` gets adapter `{STAND_IN_ADAPTER['name']}` (stand-in)",
            {"models": with_first(adapters=adapters)},
        ),
    ]


@contextlib.contextmanager
def stand_ins(models: list[dict[str, Any]]) -> Iterator[None]:
    """Hub metadata for the stand-in revision and adapter, for the duration.

    A temporary metadata root holds the committed model-metadata/ plus, under the stand-in SHA, a
    copy of each model's committed revision and a stand-in adapter_config.json; the planner's
    loaders read it instead of model-metadata/ (their `metadata_root` default), nothing else moves.
    """
    from planner import hub

    with tempfile.TemporaryDirectory(prefix="llm-serving-stand-ins-") as tmp:
        root = Path(tmp)
        shutil.copytree(hub.DEFAULT_METADATA_ROOT, root, dirs_exist_ok=True)
        for model in models:
            source = hub.metadata_dir(model["repo"], model["revision"])
            if source.is_dir():
                target = hub.metadata_dir(model["repo"], STAND_IN_REVISION, root)
                shutil.copytree(source, target, dirs_exist_ok=True)
                (target / "SOURCE.md").write_text(
                    f"Stand-in for a new commit: a copy of {model['revision']} (offline_plan/update_diff.py).\n"
                )
        adapter = hub.metadata_dir(STAND_IN_ADAPTER["repo"], STAND_IN_ADAPTER["revision"], root)
        adapter.mkdir(parents=True, exist_ok=True)
        (adapter / hub.ADAPTER_CONFIG_FILE).write_text(
            json.dumps({**_STAND_IN_ADAPTER_CONFIG, "base_model_name_or_path": models[0]["repo"]})
        )
        loaders: tuple[Any, ...] = (hub.load_model_metadata, hub.load_adapter_metadata)
        saved = [dict(f.__kwdefaults__ or {}) for f in loaders]
        try:
            for f in loaders:
                f.__kwdefaults__ = {**(f.__kwdefaults__ or {}), "metadata_root": root}
            yield
        finally:
            for f, kw in zip(loaders, saved, strict=True):
                f.__kwdefaults__ = kw


# Types whose replacement or deletion would lose a cluster, its nodes, the weights or the network:
# a weekly change must never do either to them.
NEVER_REPLACED = (
    "aws:eks/cluster:Cluster",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:s3/bucket:Bucket",
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "aws:efs/fileSystem:FileSystem",
    "aws:kms/key:Key",
    "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool",
    "gcp:storage/bucket:Bucket",
    "gcp:compute/network:Network",
    "gcp:compute/subnetwork:Subnetwork",
    "gcp:kms/keyRing:KeyRing",
    "gcp:kms/cryptoKey:CryptoKey",
)


def with_change(before: Evaluation, change: WeeklyChange) -> Evaluation:
    """The program evaluated again with `change` on top of the config `before` ran with."""
    config = {**before.config, **{f"{PROJECT}:{k}": json.dumps(v) for k, v in change.overrides.items()}}
    with stand_ins(config_list(before.config, "models")):
        return evaluate(before.stack, config, before.secret_keys, program=before.program or PROGRAM)


def weekly_diffs(before: Evaluation) -> list[tuple[WeeklyChange, dict[str, Change]]]:
    """Each weekly change against `before`."""
    return [(change, classify(before, with_change(before, change))) for change in weekly_changes(before.config)]


def replaced_section(before: Evaluation) -> list[str]:
    out = [
        "## What a change replaces",
        "",
        (
            "A second `pulumi up` after each everyday change, evaluated offline (offline_plan/update_diff.py; "
            "replace-on-change properties from offline_plan/replace_on_change.json, each with its source). A new "
            "revision or adapter is a stand-in commit whose metadata is a copy of the current one: what moves is "
            "the revision string. Clusters, node pools, buckets, networks, KMS keys and file systems must never "
            "appear below as replaced or deleted (tests/offline_plan/test_update_diff.py holds it)."
        ),
        "",
        "| change | created | updated | replaced (the replace-on-change property) | deleted |",
        "|---|---|---|---|---|",
    ]
    try:
        diffs = weekly_diffs(before)
    except Exception as err:  # a stack the weekly edits do not fit (no models, a refused edit)
        problem = (str(err).strip() or type(err).__name__).splitlines()[0]
        return [*out[:2], f"(not evaluated: {problem})", ""]
    for change, diff in diffs:

        def of(kind: str, diff: dict[str, Change] = diff) -> list[Change]:
            return sorted((c for c in diff.values() if c.kind == kind), key=lambda c: (c.type, c.name))

        replaced = "; ".join(f"`{c.name}` ({', '.join(f'`{f}`' for f in c.forced)})" for c in of("replace"))
        deleted = ", ".join(f"`{c.name}`" for c in of("delete"))
        out.append(
            f"| {change.name}: {change.what} | {len(of('create'))} | {len(of('update'))} | "
            f"{replaced or 'nothing'} | {deleted or 'nothing'} |"
        )
    # No time in the file: a plan reads the same for the same program (docs/lifecycle.md gives the figure).
    out += ["", "(Four more evaluations of the program under the mock runtime.)", ""]
    return out
