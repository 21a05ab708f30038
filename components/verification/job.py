"""One Job per stack that checks every model once the servers and the entrance are ready.

Why a pinned Python image with the tools mounted from a ConfigMap, not an image the program builds:
the endpoint tools are standard library only, so any CPython 3.11+ runs them; building an image would
need a registry to push to, credentials in CI and a build step before every `pulumi up`, and the
image would hide which code ran. With the ConfigMap the Job runs the very files of this checkout
(`python -m components.smoke`'s code), and a changed tool is a changed ConfigMap, so a new Job.

What the Job does (endpoint_tools/verify.py): for each vLLM model, against its in-cluster Service,
the smoke checks (health, models, chat with usage, streaming to [DONE], the context limit, the
metrics), the kv check against the plan's kvCacheTokens, the template check (the chat template
renders), the golden greedy prompts against the model's committed record (models[].verification.golden;
golden/<name>.json, shipped in the targets file), and every name the server serves (the
model and its LoRA adapters) answering under its own name; with models[].verification.sweep, a short load
sweep against the plan's prediction at its levels (planner/sweep_prediction.py, shipped in the targets file,
its time in the deadline). It does not go through the entrance's
public host name: on a first `pulumi up` its DNS record does not exist yet (the user creates it
from the stack output), so the check would fail every first deployment; the Job waits for the
entrance's objects instead, and `python -m components.smoke --entrance` checks the public path
from outside (docs/verification.md).

`pulumi up` waits for the Job (pulumi-kubernetes awaits a Job until it is Complete and fails the
update when it is Failed; offline_plan/waits.py counts its customTimeouts). Pulumi cannot read a
Job's log, so the stack output says where the report is and what was expected, not the result:
an update that succeeded means every check passed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from common import contract, images, pod_security
from common.engine import VLLM_IMAGE, VLLM_VERSION
from components.serving.vllm import API_KEY_SECRET_KEY
from components.verification.tools import ENTRY_MODULE, ROOT, TOOLS_MOUNT_PATH, tool_sources, volume_items
from planner.plan import ModelPlan

JOB_NAME = "llm-serving-verify"
COMPONENT = "verification"
# Docker Hub's official image, by version tag (policies/rules/images.py wants a tag or a digest).
# Any CPython >= 3.10 runs the tools (PEP 604 unions at run time in dataclasses are not used; the
# tools' own tests run on the project's 3.11).
# Its reference (with the digest once resolved) is kept with every other image in common/images.py.
IMAGE = images.reference("verify-python")
IMAGE_DIGEST = images.IMAGES["verify-python"].digest
# The tools write nothing but may use tempfile: a small /tmp on the read-only root.
TMP_SIZE_LIMIT = "64Mi"
# The shortfall of KV-cache tokens below the plan's that still passes (endpoint_tools/kv_capacity.py).
KV_TOLERANCE_PERCENT = 10

# Time budget of one model's checks, a judgement stated so it can be argued with:
# - each request may take REQUEST_BASE_SECONDS plus the prefill of a full context at
#   PREFILL_FLOOR_TOKENS_PER_SECOND (the context check sends prompts of max-model-len tokens; 1,000
#   tokens/s is far below any GPU's prefill rate, so only a broken server runs into it);
# - about HEAVY_REQUESTS such requests per model (chat, stream, three boundary prompts, the names)
#   plus LIGHT_SECONDS for /health, /v1/models, /tokenize and /metrics.
REQUEST_BASE_SECONDS = 60
PREFILL_FLOOR_TOKENS_PER_SECOND = 1000
HEAVY_REQUESTS = 6
# The golden prompts (endpoint_tools/golden.py PROMPTS; 32 output tokens each), one request each;
# tests/components/verification/test_golden_job.py keeps the two equal (components never import endpoint_tools). Their
# prompts are a sentence, so each gets REQUEST_BASE_SECONDS without the full-context prefill term.
GOLDEN_REQUESTS = 4
# A record is a few kilobytes; anything far larger is not one (endpoint_tools/golden.py reads 256 KiB).
MAX_GOLDEN_BYTES = 256 * 1024
LIGHT_SECONDS = 120
# Scheduling the pod and pulling a ~50 MB image.
POD_START_SECONDS = 300
# Pulumi waits past the Job's own deadline, so the Job's DeadlineExceeded is what the update reports.
PULUMI_WAIT_MARGIN_SECONDS = 120
API_KEY_ENV_PREFIX = "LLM_SERVING_API_KEY_"
TARGETS_FILE = "targets.json"
TARGETS_MOUNT_PATH = "/etc/llm-serving-verify"


@dataclass
class VerificationTarget:
    """One model to check: its plan, its in-cluster base URL (no /v1) and its API key Secret."""

    plan: ModelPlan
    base_url: pulumi.Input[str]
    api_key_secret: pulumi.Input[str] | None = None


@dataclass
class VerificationArgs:
    namespace: str
    targets: list[VerificationTarget]
    # The servers and the entrance: the Job starts once every one of them is ready.
    wait_for: list[pulumi.Resource] = field(default_factory=list)
    system_node_selector: dict[str, str] | None = None
    kv_tolerance_percent: float = KV_TOLERANCE_PERCENT
    # images.pullThrough: upstream registry -> the cache that serves it (common/images.mirrored).
    image_mirrors: dict[str, str] = field(default_factory=dict)


def request_timeout_seconds(plan: ModelPlan) -> int:
    return REQUEST_BASE_SECONDS + math.ceil(plan.max_model_len / PREFILL_FLOOR_TOKENS_PER_SECOND)


def names_of(plan: ModelPlan) -> list[str]:
    """The model and every LoRA adapter its server serves."""
    return [plan.served_name, *(plan.lora.names if plan.lora else [])]


def golden_mode(plan: ModelPlan) -> str:
    return plan.model.verification.golden


def sweep_entry(plan: ModelPlan) -> dict[str, Any] | None:
    """The targets file's load sweep of a model (models[].verification.sweep), with the plan's prediction at
    its levels, lengths and SLO (planner/sweep_prediction.py: computed at plan time, so no plan.json is needed
    in the cluster); None when the sweep is off."""
    sweep = plan.model.verification.sweep
    if not sweep.enabled or plan.prediction is None:
        return None
    prediction = plan.prediction
    if prediction["predicted"]:
        wanted = set(sweep.concurrency)
        prediction = {**prediction, "levels": [lv for lv in prediction["levels"] if lv["concurrency"] in wanted]}
    return {
        "concurrency": list(sweep.concurrency),
        "requestsPerLevel": sweep.requestsPerLevel,
        "promptTokens": prediction["promptTokens"],
        "outputTokens": prediction["outputTokens"],
        "prediction": prediction,
    }


def sweep_seconds(plan: ModelPlan) -> int:
    """The sweep's time budget: per level, its requests in rounds of `concurrency` at once, each round one request's
    budget (REQUEST_BASE_SECONDS plus its prompt at PREFILL_FLOOR_TOKENS_PER_SECOND); one warm-up request first."""
    entry = sweep_entry(plan)
    if entry is None:
        return 0
    per_request = REQUEST_BASE_SECONDS + math.ceil(entry["promptTokens"] / PREFILL_FLOOR_TOKENS_PER_SECOND)
    rounds = sum(math.ceil(entry["requestsPerLevel"] / n) for n in entry["concurrency"])
    return per_request * (rounds + 1)


def total_timeout_seconds(plan: ModelPlan) -> int:
    golden = GOLDEN_REQUESTS * REQUEST_BASE_SECONDS if golden_mode(plan) != "off" else 0
    checks = request_timeout_seconds(plan) * (HEAVY_REQUESTS + len(names_of(plan))) + golden + LIGHT_SECONDS
    return checks + sweep_seconds(plan)


def golden_key(plan: ModelPlan) -> dict[str, str]:
    """What produces a model's greedy answers (endpoint_tools/golden.py KEY_FIELDS), as the Job records it."""
    image = plan.model.image
    return {
        "revision": plan.revision,
        # The smoke command's own form (`vllm <version>` from GET /version), so records made by hand
        # and by the Job compare; another image than the pinned one is named by its reference.
        "engine": f"vllm {VLLM_VERSION}" if image == VLLM_IMAGE else f"image {image}",
        # None: what the checkpoint declares (vLLM reads it from config.json).
        "quantization": plan.model.quantization or "checkpoint",
        "kvCacheDtype": plan.model.kvCacheDtype,
    }


def golden_record_path(plan: ModelPlan) -> str:
    return f"golden/{plan.served_name}.json"


def golden_record(plan: ModelPlan) -> Any | None:
    """The committed record of a model (parsed JSON), None when there is none yet.

    Only its size and JSON are checked here (components never import endpoint_tools); its fields are
    checked by tests/components/verification/test_golden_job.py for every committed record and by the
    Job's runner, which fails with a usage error naming the field.
    """
    path = ROOT / golden_record_path(plan)
    if not path.is_file():
        return None
    data = path.read_bytes()
    if len(data) > MAX_GOLDEN_BYTES:
        raise ValueError(
            f"{golden_record_path(plan)} is {len(data):,} bytes; a golden record is at most "
            f"{MAX_GOLDEN_BYTES:,} (record it again: docs/verification.md)"
        )
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ValueError(
            f"{golden_record_path(plan)} is not JSON ({exc}); record it again (docs/verification.md)"
        ) from None


def golden_entry(plan: ModelPlan) -> dict[str, Any] | None:
    """The targets file's golden entry of a model: mode, key and the committed record (or null)."""
    if golden_mode(plan) == "off":
        return None
    return {"mode": golden_mode(plan), "key": golden_key(plan), "record": golden_record(plan)}


def deadline_seconds(plans: list[ModelPlan]) -> int:
    """The Job's activeDeadlineSeconds: the pod's start and every model's checks, one after another."""
    return POD_START_SECONDS + sum(total_timeout_seconds(p) for p in plans)


def expected(plan: ModelPlan) -> dict[str, Any]:
    """What the Job checks a model against: the plan's numbers and names."""
    golden = golden_mode(plan)
    out: dict[str, Any] = {
        "kvCacheTokens": plan.sizing.kv_cache_tokens,
        "maxModelLen": plan.max_model_len,
        "names": names_of(plan),
        "golden": {"mode": golden, "record": golden_record_path(plan) if golden_record(plan) is not None else None}
        if golden != "off"
        else {"mode": "off"},
    }
    sweep = sweep_entry(plan)
    if sweep is not None:
        out["sweep"] = sweep
    return out


def calibration_context(plan: ModelPlan) -> dict[str, Any]:
    """What decided the prediction; printed beside the measured tokens as a calibration case."""
    return {
        "repo": plan.repo,
        "revision": plan.revision,
        "vllm": VLLM_VERSION,
        "gpu": plan.gpu.name,
        "tensorParallelSize": plan.tensor_parallel_size,
        "pipelineParallelSize": plan.pipeline_parallel_size,
        "maxModelLen": plan.max_model_len,
        "gpuMemoryUtilization": plan.model.gpuMemoryUtilization,
        "kvCacheDtype": plan.model.kvCacheDtype,
        "maxLoraRank": plan.lora.max_lora_rank if plan.lora else None,
    }


def targets_document(
    plans: list[ModelPlan], base_urls: list[str], api_key_envs: list[str | None], tolerance_percent: float
) -> str:
    """The targets file endpoint_tools/verify.py reads (JSON, keys sorted so equal plans give equal text)."""
    targets = []
    for plan, url, key_env in zip(plans, base_urls, api_key_envs, strict=True):
        targets.append(
            {
                "model": plan.served_name,
                "baseUrl": url,
                "names": names_of(plan),
                "maxModelLen": plan.max_model_len,
                "expectKvTokens": plan.sizing.kv_cache_tokens,
                "apiKeyEnv": key_env,
                "requestTimeoutSeconds": request_timeout_seconds(plan),
                "totalTimeoutSeconds": total_timeout_seconds(plan),
                "calibration": calibration_context(plan),
                "golden": golden_entry(plan),
                "sweep": sweep_entry(plan),
            }
        )
    return json.dumps({"kvTolerancePercent": tolerance_percent, "targets": targets}, indent=1, sort_keys=True)


def content_hash(
    expected_by_model: dict[str, Any], key_envs: list[str | None], goldens: dict[str, Any] | None = None
) -> str:
    """Twelve hex digits over the tools' source and what the Job checks (see Verification)."""
    text = json.dumps(
        {"tools": tool_sources(), "expected": expected_by_model, "keys": key_envs, "golden": goldens or {}},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _labels() -> dict[str, str]:
    return {
        "app.kubernetes.io/name": JOB_NAME,
        contract.LABEL_PART_OF: contract.PART_OF,
        contract.LABEL_COMPONENT: COMPONENT,
    }


def pod_spec(
    config_map: pulumi.Input[str],
    api_key_secrets: list[tuple[str, pulumi.Input[str]]],
    system_node_selector: dict[str, str] | None,
    image_mirrors: dict[str, str] | None = None,
) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": "PYTHONPATH", "value": TOOLS_MOUNT_PATH},
        # The tools' folder is a read-only ConfigMap: no .pyc files, and unbuffered lines in the log.
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    env += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": API_KEY_SECRET_KEY}}}
        for name, secret in api_key_secrets
    ]
    spec: dict[str, Any] = {
        # One attempt: a failed check is the answer, and a retry would double the wait.
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": pod_security.pod_security_context(),
        "containers": [
            {
                "name": "verify",
                "image": images.mirrored(IMAGE, image_mirrors or {}),
                "command": ["python3", "-m", ENTRY_MODULE, "--targets", f"{TARGETS_MOUNT_PATH}/{TARGETS_FILE}"],
                "env": env,
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                "volumeMounts": [
                    {"name": "tools", "mountPath": TOOLS_MOUNT_PATH, "readOnly": True},
                    {"name": "targets", "mountPath": TARGETS_MOUNT_PATH, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
                # Standard-library Python reading HTTP answers: nothing needs root or a writable root.
                "securityContext": pod_security.container_security_context(),
            }
        ],
        "volumes": [
            {"name": "tools", "configMap": {"name": config_map, "items": volume_items()}},
            {
                "name": "targets",
                "configMap": {"name": config_map, "items": [{"key": TARGETS_FILE, "path": TARGETS_FILE}]},
            },
            {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}},
        ],
    }
    if system_node_selector:
        # A CPU pod: never on a GPU node (those carry the GPU taint anyway).
        spec["nodeSelector"] = system_node_selector
    return spec


def summary(namespace: str, plans: list[ModelPlan], tolerance_percent: float) -> dict[str, Any]:
    """The stack output: where the report is and what the Job checked against (not its result)."""
    deadline = deadline_seconds(plans)
    return {
        "job": JOB_NAME,
        "namespace": namespace,
        "result": (
            "pulumi up waits for the Job: an update that succeeded means every check passed; a failed "
            "check fails the update. The report is the Job's log (logs); its last line is "
            "`verify-summary: {json}` with predicted and actual KV-cache tokens per model, and each "
            "model's `calibration:` line is the case to send back (docs/verification.md)."
        ),
        "logs": f"kubectl -n {namespace} logs job/{JOB_NAME}",
        "wait": f"kubectl -n {namespace} wait --for=condition=complete --timeout={deadline}s job/{JOB_NAME}",
        "deadlineSeconds": deadline,
        "kvTolerancePercent": tolerance_percent,
        "expected": {p.served_name: expected(p) for p in plans},
        "image": IMAGE,
        "unresolved": [
            {"subject": IMAGE_DIGEST.subject, "source": IMAGE_DIGEST.source, "resolveWith": IMAGE_DIGEST.resolve_with}
        ],
    }


class Verification(pulumi.ComponentResource):
    def __init__(self, name: str, args: VerificationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:Verification", name, None, opts)
        if not args.targets:
            raise ValueError("Verification needs at least one model to check")
        plans = [t.plan for t in args.targets]
        key_envs = [
            f"{API_KEY_ENV_PREFIX}{i}" if t.api_key_secret is not None else None for i, t in enumerate(args.targets)
        ]
        targets = pulumi.Output.all(*[t.base_url for t in args.targets]).apply(
            lambda urls: targets_document(plans, list(urls), key_envs, args.kv_tolerance_percent)
        )
        data = pulumi.Output.all(targets).apply(lambda t: {**tool_sources(), TARGETS_FILE: t[0]})
        self.summary = summary(args.namespace, plans, args.kv_tolerance_percent)
        # The ConfigMap's name carries a hash of the tools and of what they check: new tools or a new
        # plan make a new ConfigMap, whose new name changes the Job's template, so the Job is
        # replaced and runs again; an unchanged stack keeps its finished Job.
        # A newly committed golden record or a new key (revision, engine, ...) runs the Job again too.
        digest = content_hash(self.summary["expected"], key_envs, {p.served_name: golden_entry(p) for p in plans})
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-tools",
            metadata={"name": f"{JOB_NAME}-{digest}", "namespace": args.namespace, "labels": _labels()},
            data=data,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for), delete_before_replace=True),
        )
        # A target has an env name exactly when it has a key; the second test says so to the checker.
        secrets = [
            (env, t.api_key_secret)
            for env, t in zip(key_envs, args.targets, strict=True)
            if env is not None and t.api_key_secret is not None
        ]
        deadline = deadline_seconds(plans)
        wait = deadline + PULUMI_WAIT_MARGIN_SECONDS
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={"name": JOB_NAME, "namespace": args.namespace, "labels": _labels()},
            spec={
                "backoffLimit": 0,
                "activeDeadlineSeconds": deadline,
                # ttlSecondsAfterFinished is deliberately unset: the cluster would delete the finished
                # Job (and its log), and the next `pulumi up` would run it again.
                "template": {
                    "metadata": {"labels": _labels()},
                    "spec": pod_spec(f"{JOB_NAME}-{digest}", secrets, args.system_node_selector, args.image_mirrors),
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[config_map, *args.wait_for],
                # The name is fixed (the commands in the stack output use it): a replacement must
                # delete the old Job before the new one can take the name.
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{wait}s", update=f"{wait}s"),
            ),
        )
        self.register_outputs({"summary": self.summary})
