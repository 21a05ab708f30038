"""plan.json: what plan.md says, as data, for `python -m offline_plan.diff` to compare two plans.

Written beside plan.md by `make plan`. It holds the review's facts (deployable and why, the models' numbers, the
GPUs and their cost, the policy verdicts, the images and digests, the warnings) and every resource the program
registers with its inputs (secrets redacted, as in the manifests), so the diff can say which objects a change
creates, updates, replaces or deletes the way offline_plan/update_diff.py does for the weekly changes. Keys are
sorted and lists ordered, so the file is byte-identical from run to run like plan.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from offline_plan import review
from offline_plan.mock_runtime import Evaluation, RecordedResource, redact_secrets, whole_numbers

FORMAT = "llm-serving offline plan summary v1"
FILENAME = "plan.json"
# The numbers of a model plan.md's "Models" table shows (offline_plan/write.py) and the diff reports.
TABLE_FIELDS: tuple[str, ...] = (
    "revision",
    "pool",
    "gpu",
    "tensorParallelSize",
    "pipelineParallelSize",
    "minReplicas",
    "maxReplicas",
    "maxModelLen",
    "kvCacheTokens",
    "startupBudgetSeconds",
)
# The capacity at the SLO of a model with `load` (offline_plan/capacity.py); None without one. `derivedFromLoad`: the
# deployed values the plan derived from the load (planner/capacity.py), so the diff shows them appear and move.
CAPACITY_FIELDS = (
    "replicasAtPeak",
    "replicasAtTrough",
    "concurrencyPerReplicaAtSlo",
    "queueThreshold",
    "derivedFromLoad",
    "gpuHoursPerDay",
    "costPerHourAtPeak",
    "costPerMillionOutputTokens",
)
MODEL_FIELDS: tuple[str, ...] = TABLE_FIELDS + CAPACITY_FIELDS
# Beside them, `prediction` (planner/sweep_prediction.py): per concurrency level what a load sweep should measure,
# read by `python -m components.loadtest --expect-from-plan` (endpoint_tools/expectation.py); None without one.
GPU_FIELDS = (
    "gpu",
    "machineType",
    "region",
    "capacityType",
    "gpusPerNode",
    "minNodes",
    "maxNodes",
    "minGpus",
    "maxGpus",
    "onDemandPerNodeHour",
    "spotPerNodeHour",
    "minCostPerHour",
    "maxCostPerHour",
    "nodesDerivedFromLoad",
)


def object_label(r: RecordedResource) -> tuple[str, str]:
    """(kind, name) as a reviewer reads them: a Kubernetes object's kind and namespace/name, else the resource type
    and the program's name for it."""
    if r.is_kubernetes_object:
        meta = r.inputs.get("metadata") or {}
        name = str(meta.get("name", r.name)) if isinstance(meta, dict) else r.name
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        return str(r.inputs.get("kind")), f"{namespace}/{name}" if namespace else name
    return r.type, r.name


def _resource(r: RecordedResource) -> dict[str, Any]:
    kind, label = object_label(r)
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "kind": kind,
        "label": label,
        "custom": bool(r.custom),
        "inputs": whole_numbers(redact_secrets(r.inputs)),
        "replaceOnChanges": sorted(r.replace_on_changes),
        "ignoreChanges": sorted(r.ignore_changes),
    }


def model_entries(sizing_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """plan.json's `models`: each model's MODEL_FIELDS and its `prediction` (planner/sweep_prediction.py)."""
    return [
        {"model": row["model"], **{k: row.get(k) for k in MODEL_FIELDS}, "prediction": row.get("prediction")}
        for row in sizing_rows
    ]


def summary(
    evaluation: Evaluation,
    verdicts: list[Any],
    image_rows: list[dict[str, Any]],
    missing_digests: list[str],
    require_digest: bool,
    chart_reasons: list[str] | None = None,
) -> dict[str, Any]:
    decided = review.decision(evaluation, verdicts, missing_digests, require_digest, chart_reasons)
    costs = [{k: row[k] for k in ("pool", *GPU_FIELDS)} for row in review.gpu_costs(evaluation)]
    return {
        "format": FORMAT,
        "stack": evaluation.stack,
        "deployable": decided["deployable"],
        "reasons": decided["reasons"],
        "models": model_entries(evaluation.outputs.get("sizing") or []),
        "gpus": costs,
        "verdicts": sorted(
            (
                {"level": v.level, "policy": v.policy, "resource": f"{v.kind}/{v.name}", "message": v.message}
                for v in verdicts
            ),
            key=lambda v: (v["level"], v["policy"], v["resource"], v["message"]),
        ),
        "images": image_rows,
        "warnings": review.warnings(evaluation) + decided["beforeUp"],
        # Created resources only: a read of an existing object (`Resource.get`) is not the program's to change.
        "resources": sorted(
            (_resource(r) for r in evaluation.resources if r.urn and r.read_id is None), key=lambda r: r["urn"]
        ),
    }


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
