"""KServeModel: one model served through a KServe v0.20 InferenceService (the `engine: kserve` path).

The same model, sized by the same plan, as the vLLM path (components/serving/vllm.py), and served by
the same engine: KServe owns the Deployment, Service and autoscaler, this component owns the
ServingRuntime and what goes into the InferenceService:

- Standard deployment mode. In v0.20 `Standard` is the name of raw-deployment mode and
  `RawDeployment` is its deprecated alias (kserve/kserve v0.20.0 pkg/constants/constants.go,
  DeploymentModeType: `LegacyRawDeployment = "RawDeployment" // deprecated: use Standard`).
- The program's own ServingRuntime, one per model in the serving namespace, running `vllm serve`
  from the pinned vLLM image (common/engine.py, through images.pullThrough like the vLLM path). KServe
  v0.20 ships a runtime of that shape itself (config/runtimes/kserve-vllmserver.yaml: vLLM's OpenAI
  server on 8080 reading /mnt/models), but with its own image tag; ours pins the project's release.
  The InferenceService selects it by `predictor.model.runtime`; KServe merges the predictor's model
  container onto the runtime's (pkg/controller/v1beta1/inferenceservice/utils/utils.go
  MergeRuntimeContainers: strategic merge, args concatenated runtime first), so the runtime carries
  only the image and the command and the InferenceService the whole command line, key, probes and
  resources, where the policy pack reads them.
- Engine flags, API key, probes, drain: the vLLM path's own (components/serving/engine_args.py,
  api_key.py, probes.py) on vLLM's /health and port 8080.

Weights (`storage`):
- bucket (default): storageUri = the mirrored bucket folder of the pinned commit
  (`s3://` / `gs://`, ModelBucket.uri), read by KServe's storage initializer as the reader
  ServiceAccount (EKS Pod Identity / GKE Workload Identity), so nothing comes from the Hub at start-up. On a cluster
  without a bucket the model store's ReadWriteMany claim is used instead (`pvc://`).
- hf: storageUri = `hf://org/name:<commit>` and a ClusterStorageContainer whose storage-initializer
  reads HF_TOKEN from a Secret (see `cluster_storage_container`).
Either way the weights are at /mnt/models in the model container, which `vllm serve` reads.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from common import contract, gpus, images, pod_security
from common.alerting import RUNBOOK_DOC
from common.engine import VLLM_VERSION
from common.facts import Fact
from components.addons import kserve as kserve_addon
from components.addons.crd_sources import CrdSources, custom_resource
from components.cluster.interface import GpuPlacement, ModelBucket
from components.serving import (
    alerts,
    api_key,
    dashboard,
    disruption,
    observability,
    probes,
    scaling,
    slo,
    targets,
    writable,
)
from components.serving import engine_args as vllm_args
from components.serving import resources as server_resources
from planner.plan import ModelPlan

# --- KServe v0.20 names, pinned ---------------------------------------------------------------

KSERVE_VERSION = kserve_addon.VERSION
API_VERSION = "serving.kserve.io/v1beta1"
STORAGE_CONTAINER_API_VERSION = "serving.kserve.io/v1alpha1"
SERVING_RUNTIME_API_VERSION = "serving.kserve.io/v1alpha1"
DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
STANDARD_MODE = kserve_addon.STANDARD_MODE
# hpa | keda | external | none (pkg/constants/constants.go, AutoscalerClassType).
AUTOSCALER_CLASS_ANNOTATION = "serving.kserve.io/autoscalerClass"
# KServe labels every predictor pod with the InferenceService's name.
ISVC_POD_LABEL = "serving.kserve.io/inferenceservice"
# The weights are a Hugging Face checkpoint. With `predictor.model.runtime` set, KServe checks only
# that the runtime lists the format, whatever its autoSelect (v1beta1 predictor_model.go
# getServingRuntimeSupportedModelFormatLabelSet); autoSelect false keeps other InferenceServices of
# the namespace from picking this model's runtime.
HUGGINGFACE_FORMAT = "huggingface"
# The runtime's name: the model's, with a suffix KServe's name-based server-type fallback does not
# read as one of its own runtimes (utils.go UpdateImageTag appends "-gpu" to a huggingfaceserver's
# tag; ours must stay the pinned reference).
RUNTIME_SUFFIX = "-vllm-runtime"
# Tag and digest in common/images.py.
STORAGE_INITIALIZER_IMAGE = images.reference("storage-initializer")
if images.IMAGES["storage-initializer"].tag != KSERVE_VERSION:
    raise ValueError(f"common/images.py pins the storage initializer at another release than {KSERVE_VERSION}")
# The model container's port: `vllm serve --port`. 8080 is KServe's model-server port (its own
# vllmserver runtime serves there too), which the predictor Service targets (service_reconciler.go
# createDefaultSvc: the first container port).
HTTP_PORT = 8080
# The predictor Service's own port (service_reconciler.go: constants.CommonDefaultHttpPort = 80,
# targetPort the container's first port), so the in-cluster URL carries no port.
SERVICE_PORT = 80
# Where the storage initializer puts the weights (KServe mounts them there in kserve-container).
KSERVE_MODEL_DIR = "/mnt/models"
# The canary predictor's name; KServe names its Deployment <isvc>-canary-predictor.
CANARY_NAME = "canary"
# The model container's name. KServe's storage initializer mounts /mnt/models into the container of
# this name (constants.InferenceServiceContainerName), so the runtime's container must carry it.
RUNTIME_CONTAINER = "kserve-container"
HF_TOKEN_KEY = "HF_TOKEN"
COMPONENT = "kserve-predictor"
SHM_VOLUME = "devshm"
# Room for the storage initializer's download next to the weights themselves: the emptyDir it fills
# at /mnt/models is node-local ephemeral storage, and a node without room evicts the pod mid-load.
EPHEMERAL_STORAGE_FACTOR = 1.1

# KServe injects the storage initializer into the predictor pod with a container securityContext of
# its own configuration (the `storageInitializer` entry of the inferenceservice-config ConfigMap),
# not ours; the pod-level context above reaches it, the container-level controls (no privilege
# escalation, capabilities dropped) may not. The restricted level would then reject the whole pod.
POD_SECURITY_EXCEPTION = (
    "baseline: KServe injects the storage-initializer container into each predictor pod with "
    "the container securityContext of its own configuration (inferenceservice-config), which "
    "this program does not set and restricted may reject."
)

STORAGE_INITIALIZER_CONTEXT = Fact(
    subject="the container securityContext KServe v0.20 gives the storage-initializer it injects",
    value=None,
    source="kserve/kserve v0.20.0 inferenceservice-config storageInitializer (not read here)",
    established=False,
    resolve_with="kubectl get configmap inferenceservice-config -n kserve -o jsonpath='{.data.storageInitializer}'",
)

KServeStorage = Literal["bucket", "hf"]
GIB = 1024**3


class KServeConfigError(ValueError):
    """A model the KServe path cannot serve as configured; the message names the key and the fix."""


# --- pure shaping (no resources), shared with the tests ---------------------------------------


def runtime_name(plan: ModelPlan) -> str:
    return f"{plan.served_name}{RUNTIME_SUFFIX}"


def model_args(plan: ModelPlan, rotating: bool = False) -> list[str]:
    """The whole `vllm serve` command line after the command: the vLLM path's, on KServe's model
    dir and port (served name, engine flags, drain, host/port), plus both keys while rotating."""
    return [*vllm_args.serve_args(plan, model_dir=KSERVE_MODEL_DIR, port=HTTP_PORT), *vllm_args.api_key_args(rotating)]


def hf_uri(repo: str, revision: str) -> str:
    # KServe's hf:// form is hf://<org>/<name>:<revision>; the commit pins the bytes.
    return f"hf://{repo}:{revision}"


def hf_uri_regex(repo: str, revision: str) -> str:
    """A Go regexp matching exactly this model's hf:// URI (repo ids allow only . as a metachar)."""
    return "^" + re.escape(hf_uri(repo, revision)).replace("\\/", "/").replace("\\:", ":") + "$"


def probe_specs(plan: ModelPlan) -> dict[str, dict[str, Any]]:
    """The vLLM path's probes (numbers and vLLM's /health) on the runtime's port.

    `vllm serve` answers HTTP only once the engine is built, /health turns 503 when the engine
    dies, and it is outside the API-key guard (components/serving/probes.py), so the same three
    probes work here with or without a key.
    """
    pp = probes.probe_plan(plan)
    handler = {"httpGet": {"path": probes.HEALTH_PATH, "port": HTTP_PORT}}
    return {
        "startupProbe": pp.startup_probe(handler),
        "readinessProbe": pp.readiness_probe(handler),
        "livenessProbe": pp.liveness_probe(handler),
    }


def check_servable(plan: ModelPlan) -> None:
    key = f"models[{plan.index}]"
    if plan.nodes_per_replica > 1:
        raise KServeConfigError(
            f"{key}: one replica spans {plan.nodes_per_replica} nodes; the KServe path serves single-node replicas "
            "only, use engine: vllm (LeaderWorkerSet) or a pool with enough GPUs per node"
        )
    if vllm_args.needs_chat_template_file(plan):
        raise KServeConfigError(
            f"{key}.chatTemplate: the KServe path cannot mount a chat template; remove it or use engine: vllm"
        )


@dataclass
class KServeModelArgs:
    plan: ModelPlan
    placement: GpuPlacement
    namespace: str
    crds: CrdSources
    """Where each custom resource kind comes from (components/addons): the InferenceService, its
    ClusterStorageContainer and PodMonitor wait for it."""
    storage: KServeStorage = "bucket"
    """bucket: the mirrored bucket (or the model store's claim); hf: hf://org/name:<commit>."""
    bucket: ModelBucket | None = None
    claim_name: pulumi.Input[str] | None = None
    """The model store's RWX claim; used (pvc://) when storage is bucket but the cluster has no bucket."""
    reader_service_account: pulumi.Input[str] | None = None
    """ServiceAccount bound to the bucket's reader identity; the storage initializer runs as it."""
    hf_token: pulumi.Input[str] | None = None
    """A secret Output; needed for gated models with storage hf."""
    machine: gpus.CloudMachine | None = None
    """The pool's catalog machine (stack_config.pool_machine); None on an existing cluster."""
    canary_baseline_revision: str | None = None
    """The commit now serving. With canaryTrafficPercent it keeps serving while `plan.revision` runs as a canary."""
    monitoring: bool = True
    """Create a PodMonitor so Prometheus scrapes vLLM's metrics (the autoscaler's queue signal)."""
    monitoring_labels: dict[str, str] = field(default_factory=dict)
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The mirror Job: the bucket folder must be complete before a storage initializer reads it."""
    api_key: pulumi.Input[str] | None = None
    """The API key (a Pulumi secret); stored in a Secret and read by vLLM from VLLM_API_KEY, as on the vLLM path."""
    api_key_next: pulumi.Input[str] | None = None
    """A second key valid beside `api_key` during a rotation (a Pulumi secret, same Secret)."""
    allow_unauthenticated: bool = False
    """exposure.allowUnauthenticated: marks the predictor pods with the waiver the policy pack accepts."""
    image_mirrors: dict[str, str] = field(default_factory=dict)
    """images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors)."""
    dashboard_namespace: str | None = None
    """Namespace the Grafana sidecar watches (monitoring.dashboardNamespace); default: the model's."""
    alert_thresholds: alerts.AlertThresholds | None = None
    runbook_url: str = RUNBOOK_DOC
    """Where the alerts' runbook_url annotations point (monitoring.runbookUrl)."""


def storage_uri(args: KServeModelArgs, revision: str) -> pulumi.Input[str]:
    plan = args.plan
    if args.storage == "hf":
        return hf_uri(plan.repo, revision)
    if args.bucket is not None:
        return args.bucket.uri(plan.repo, revision)
    if args.claim_name is not None:
        # pvc://<claim>/<path>: KServe mounts the claim; the path holds the mirrored commit.
        relative = f"{plan.repo}/{revision}"
        return pulumi.Output.concat("pvc://", args.claim_name, "/", relative)
    raise KServeConfigError(
        f"models[{plan.index}]: engine kserve reads weights from the model bucket, but this cluster has none and "
        "no model volume was given; use modelStore.loadFrom volume/existing-claim or kserveStorage: hf"
    )


def target(name: str, args: KServeModelArgs) -> targets.Target:
    plan = args.plan
    return targets.Target(
        served_name=plan.served_name,
        namespace=args.namespace,
        # Raw mode names the predictor Deployment <isvc>-predictor; pods start with it.
        workload_name=f"{name}-predictor",
        load_seconds=plan.load_seconds,
        startup_budget_seconds=plan.startup_budget_seconds,
        labels=pod_labels(plan),
        container=RUNTIME_CONTAINER,
    )


def pod_labels(plan: ModelPlan) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": plan.served_name,
        contract.LABEL_PART_OF: contract.PART_OF,
        contract.LABEL_MODEL: plan.served_name,
        contract.LABEL_REVISION: plan.revision,
        contract.LABEL_COMPONENT: COMPONENT,
    }


def workload_annotations(plan: ModelPlan) -> dict[str, str]:
    return {
        # The policy pack compares the startup probe against this estimate.
        contract.ANNOTATION_LOAD_SECONDS: str(round(plan.load_seconds)),
        contract.ANNOTATION_REPO: plan.repo,
        contract.ANNOTATION_ENGINE_VERSION: VLLM_VERSION,
    }


def autoscaler_class(plan: ModelPlan) -> str:
    a = plan.model.autoscaling
    if not a.enabled:
        # none: KServe creates no autoscaler and pins the Deployment to minReplicas.
        return "none"
    # KServe's own HPA (class hpa) only takes cpu/memory metrics in v0.20 (hpa_reconciler.go
    # getHPAMetrics skips metrics without `resource`), so the queue-depth HPA is ours and KServe is
    # told an external autoscaler owns the replica count.
    return "keda" if a.kind == "keda" else "external"


def downloads_weights(args: KServeModelArgs) -> bool:
    """The storage initializer copies the weights (hf://, s3://, gs://); a pvc:// claim is mounted."""
    return args.storage == "hf" or args.bucket is not None


def predictor_resources(
    plan: ModelPlan, resources: server_resources.PodResources, *, downloads: bool
) -> dict[str, Any]:
    """The model container's requests and limits: the vLLM path's (GPU limits == requests, no CPU
    limit, since throttling stalls the engine loop). The program's runtime container carries the
    same CPU and memory (`serving_runtime`), so KServe's merge leaves these as they are and adds no
    CPU limit.

    `downloads`: the storage initializer copies the weights into a node-local emptyDir (not for
    pvc://, which is mounted), so the pod requests ephemeral storage for them.
    """
    req = resources.requirements(contract.GPU_RESOURCE)
    if downloads:
        req["requests"]["ephemeral-storage"] = f"{math.ceil(plan.weights_bytes * EPHEMERAL_STORAGE_FACTOR / GIB)}Gi"
    return req


def serving_runtime(plan: ModelPlan, namespace: str, image: str, resources: dict[str, Any]) -> dict[str, Any]:
    """The model's ServingRuntime: the pinned vLLM image running `vllm serve`.

    The command line, key, environment and GPUs are on the InferenceService's model container,
    merged onto this one (args concatenated, this container's first: it has none; resources maps
    key by key). CPU and memory, probes and the container securityContext are on both, with the
    same values: the policy pack checks each object on its own, and the runtime is one model's, so
    they cannot disagree. The GPUs stay with the predictor, whose pod tolerates the GPU taint.
    """
    resources = {
        part: {k: v for k, v in values.items() if k != contract.GPU_RESOURCE} for part, values in resources.items()
    }
    return {
        "apiVersion": SERVING_RUNTIME_API_VERSION,
        "kind": "ServingRuntime",
        "metadata": {"name": runtime_name(plan), "namespace": namespace, "labels": pod_labels(plan)},
        "spec": {
            "supportedModelFormats": [{"name": HUGGINGFACE_FORMAT, "autoSelect": False}],
            "containers": [
                {
                    "name": RUNTIME_CONTAINER,
                    "image": image,
                    "command": list(vllm_args.SERVE_COMMAND),
                    "ports": [{"name": "http1", "containerPort": HTTP_PORT, "protocol": "TCP"}],
                    "resources": resources,
                    **probe_specs(plan),
                    "securityContext": pod_security.container_security_context(),
                }
            ],
        },
    }


def model_env(api_key_secret: pulumi.Input[str] | None, rotating: bool) -> list[dict[str, Any]]:
    """The vLLM path's environment (components/serving/vllm.py PodBuilder.env), key included."""
    env: list[dict[str, Any]] = [
        # The storage initializer fetched everything; a Hub call from the server is an outage.
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
        # Non-root on a read-only root filesystem: caches and temp files go to emptyDirs.
        *writable.env(),
    ]
    if api_key_secret is not None:
        env += api_key.env(api_key_secret, rotating)
    return env


def predictor_spec(
    name: str,
    args: KServeModelArgs,
    uri: pulumi.Input[str],
    *,
    canary: bool = False,
    storage_container: pulumi.Input[str] | None = None,
    api_key_secret: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    plan = args.plan
    resources = server_resources.pod_resources(plan, args.machine)
    pp = probes.probe_plan(plan)
    rotating = api_key_secret is not None and args.api_key_next is not None
    model: dict[str, Any] = {
        "modelFormat": {"name": HUGGINGFACE_FORMAT},
        # The program's own runtime in this namespace (KServe looks there before ClusterServingRuntimes).
        "runtime": runtime_name(plan),
        "storageUri": uri,
        "args": model_args(plan, rotating),
        "env": model_env(api_key_secret, rotating),
        "ports": [{"name": "http1", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "resources": predictor_resources(plan, resources, downloads=downloads_weights(args)),
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, *writable.mounts()],
        "securityContext": pod_security.container_security_context(),
        "lifecycle": pp.lifecycle(),
        **probe_specs(plan),
    }
    spec: dict[str, Any] = {
        "model": model,
        "labels": pod_labels(plan)
        if not canary
        else {**pod_labels(plan), contract.LABEL_COMPONENT: f"{COMPONENT}-canary"},
        # The predictor's annotations go on its pods; Karpenter must not take a serving pod's node.
        "annotations": {
            **workload_annotations(plan),
            contract.ANNOTATION_DO_NOT_DISRUPT: "true",
            **({contract.ANNOTATION_ALLOW_UNAUTHENTICATED: "true"} if args.allow_unauthenticated else {}),
        },
        "nodeSelector": args.placement.node_selector,
        "tolerations": args.placement.tolerations,
        "terminationGracePeriodSeconds": pp.termination_grace_period_seconds,
        "volumes": [
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{resources.shm_gib}Gi"}},
            *writable.volumes(),
        ],
        # Pod-level, so it also covers the storage initializer KServe injects: non-root, seccomp,
        # and the fsGroup that lets it write the /mnt/models emptyDir. Neither it nor the runtime
        # calls the Kubernetes API (bucket credentials are the cloud identity's).
        "securityContext": pod_security.pod_security_context(),
        "automountServiceAccountToken": False,
    }
    if args.reader_service_account is not None and args.storage == "bucket":
        spec["serviceAccountName"] = args.reader_service_account
    if storage_container is not None:
        spec["storageContainerName"] = storage_container
    if canary:
        # A canary runs fixed replicas; KServe rejects autoscaling fields on it (validateCanarySpecs).
        spec["name"] = CANARY_NAME
        # The v0.20 CRD requires a container name under canary[].predictor.model (and the stable
        # predictor's validation forbids one there); the runtime's container is kserve-container.
        model["name"] = RUNTIME_CONTAINER
        return spec
    a = plan.model.autoscaling
    low, most = plan.replica_bounds
    spec["minReplicas"] = low
    spec["maxReplicas"] = most
    if a.enabled and a.kind == "keda":
        t = target(name, args)
        scale_at = scaling.ScalingTargets.of_model(a)
        spec["autoScaling"] = {
            "metrics": scaling.kserve_external_metrics(t, scale_at, a.prometheusUrl),
            "behavior": scaling.scaling_behavior(t),
        }
    return spec


def inference_service_spec(
    name: str,
    args: KServeModelArgs,
    storage_container: pulumi.Input[str] | None = None,
    api_key_secret: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    plan = args.plan
    percent = plan.model.canaryTrafficPercent
    baseline = args.canary_baseline_revision
    predictor = functools.partial(
        predictor_spec, name, args, storage_container=storage_container, api_key_secret=api_key_secret
    )
    if percent is not None and baseline and baseline != plan.revision:
        # v0.20 Standard mode: predictor.canaryTrafficPercent is read only by the Knative
        # reconciler; the raw-mode canary is spec.canary[] (a second, named predictor Deployment
        # taking trafficPercent), validated by inference_service_validation.go validateCanarySpecs.
        stable = predictor(storage_uri(args, baseline))
        stable["labels"] = {**stable["labels"], contract.LABEL_REVISION: baseline}
        canary = predictor(storage_uri(args, plan.revision), canary=True)
        return {"predictor": stable, "canary": [{"predictor": canary, "trafficPercent": percent}]}
    return {"predictor": predictor(storage_uri(args, plan.revision))}


def canary_warnings(args: KServeModelArgs) -> list[str]:
    plan = args.plan
    key = f"models[{plan.index}]"
    if plan.model.canaryTrafficPercent is None:
        return []
    if not args.canary_baseline_revision:
        return [
            (
                f"{key}.canaryTrafficPercent: no baseline revision to split traffic with, so {plan.revision[:12]} "
                "serves all traffic; set the revision now serving as the baseline to run the new one as a canary"
            )
        ]
    if args.canary_baseline_revision == plan.revision:
        return [f"{key}.canaryTrafficPercent: the baseline is the revision being deployed; nothing to canary"]
    return []


def cluster_storage_container(
    name: str, uri_regexes: list[str], token_secret: pulumi.Input[str], image: str = STORAGE_INITIALIZER_IMAGE
) -> dict[str, Any]:
    """A ClusterStorageContainer whose storage-initializer reads HF_TOKEN from a Secret.

    KServe's Hugging Face docs hand the token to the storage initializer this way
    (https://kserve.github.io/website/docs/model-serving/generative-inference/autoscaling, "Create a
    StorageContainer"; https://kserve.github.io/website/docs/0.20/model-serving/storage/providers/hf):
    an HF_TOKEN env on the predictor's model container stays on that container. In v0.20 the
    injector gives the initializer only credentials from the ServiceAccount's secrets or a storage
    spec (pkg/webhook/admission/pod/storage_initializer_injector.go, pkg/credentials), never the
    model container's env. The secretKeyRef resolves in the namespace of the pod it lands in.

    Matching is by an anchored regex for exactly this model's URI, and the InferenceService names
    this container (storageContainerName): v0.20's default ClusterStorageContainer also claims
    `hf://`, and a broad `hf://` prefix here would hijack other teams' hf:// models, whose pods would
    then wait for a Secret that does not exist in their namespace.
    """
    return {
        "apiVersion": STORAGE_CONTAINER_API_VERSION,
        "kind": "ClusterStorageContainer",
        "metadata": {"name": name, "labels": {contract.LABEL_PART_OF: contract.PART_OF}},
        "spec": {
            "container": {
                # KServe finds the init container by this exact name.
                "name": "storage-initializer",
                "image": image,
                "env": [
                    {
                        "name": HF_TOKEN_KEY,
                        "valueFrom": {"secretKeyRef": {"name": token_secret, "key": HF_TOKEN_KEY, "optional": False}},
                    }
                ],
                # Multi-GB checkpoints: 1Gi (the chart default) gets the initializer OOM-killed.
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                # It writes only the /mnt/models emptyDir KServe mounts, and temp files: the image's
                # writable paths are not known here, so its root filesystem stays writable.
                "securityContext": pod_security.container_security_context(read_only_root=False),
            },
            "supportedUriFormats": [{"regex": r} for r in uri_regexes],
            "workloadType": "initContainer",
        },
    }


def pod_monitor(name: str, t: targets.Target, extra_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": t.namespace, "labels": {**t.labels, **extra_labels}},
        "spec": {
            "selector": {"matchLabels": {contract.LABEL_MODEL: t.served_name}},
            "namespaceSelector": {"matchNames": [t.namespace]},
            "podMetricsEndpoints": [
                {"portNumber": HTTP_PORT, "path": probes.METRICS_PATH, "interval": observability.SCRAPE_INTERVAL}
            ],
        },
    }


def _name_of(resource: Any) -> pulumi.Output[str]:
    return resource.metadata.apply(lambda m: m["name"] if isinstance(m, dict) else m.name)


class KServeModel(pulumi.ComponentResource):
    """One model behind a KServe InferenceService: the ISVC, its hf:// storage container, monitor and HPA."""

    inference_service_name: str
    endpoint: str
    storage_uri: pulumi.Output[str]
    warnings: list[str]
    prometheus_adapter_rules: list[dict[str, Any]]
    """With autoscaling kind hpa: the prometheus-adapter `rules.external` entries the HPA's metrics
    need (docs/autoscaling.md); [] otherwise. The same as the vLLM path's, so export them once."""

    def __init__(self, name: str, args: KServeModelArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:KServeModel", name, None, opts)
        plan = args.plan
        check_servable(plan)
        isvc_name = plan.served_name
        child = pulumi.ResourceOptions(parent=self)
        self.warnings = canary_warnings(args)

        # The key exactly as the vLLM path keeps it (components/serving/api_key.py).
        self.api_key_secret_name: pulumi.Output[str] | None = None
        if args.api_key is not None:
            secret = api_key.secret(
                name, isvc_name, args.namespace, pod_labels(plan), args.api_key, args.api_key_next, child
            )
            self.api_key_secret_name = secret.metadata.apply(lambda m: m["name"])

        image = images.mirrored(plan.model.image, args.image_mirrors)
        runtime_resources = predictor_resources(
            plan, server_resources.pod_resources(plan, args.machine), downloads=downloads_weights(args)
        )
        self.serving_runtime = custom_resource(
            f"{name}-runtime", serving_runtime(plan, args.namespace, image, runtime_resources), args.crds, child
        )

        self.token_secret: k8s.core.v1.Secret | None = None
        self.storage_container: k8s.apiextensions.CustomResource | None = None
        if args.storage == "hf":
            self._hf_storage(name, args, isvc_name, child)
        container_name = _name_of(self.storage_container) if self.storage_container is not None else None

        metadata = {
            "name": isvc_name,
            "namespace": args.namespace,
            "labels": pod_labels(plan),
            "annotations": {
                **workload_annotations(plan),
                DEPLOYMENT_MODE_ANNOTATION: STANDARD_MODE,
                AUTOSCALER_CLASS_ANNOTATION: autoscaler_class(plan),
                # `pulumi up` waits for the predictor to serve; without it the InferenceService
                # would count as created when the API server accepts it.
                contract.PULUMI_WAIT_FOR: kserve_addon.READY,
            },
        }
        waits = [r for r in (self.token_secret, self.storage_container, self.serving_runtime) if r is not None]
        waits += list(args.depends_on)
        manifest = {
            "apiVersion": API_VERSION,
            "kind": "InferenceService",
            "metadata": metadata,
            "spec": inference_service_spec(isvc_name, args, container_name, self.api_key_secret_name),
        }
        wait = f"{plan.server_wait_seconds}s"
        self.inference_service = custom_resource(
            f"{name}-isvc",
            manifest,
            args.crds,
            pulumi.ResourceOptions(
                parent=self, depends_on=waits, custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait)
            ),
        )
        self.inference_service_name = isvc_name
        # Standard mode: the ISVC's Service is <isvc>-predictor, port 80 to the container's 8080, and
        # vLLM's OpenAI API is under /v1.
        self.endpoint = f"http://{isvc_name}-predictor.{args.namespace}.svc.cluster.local/v1"
        self.storage_uri = pulumi.Output.from_input(storage_uri(args, plan.revision))

        t = target(isvc_name, args)
        a = plan.model.autoscaling
        if plan.replica_bounds[1] > 1:
            # KServe creates no budget of its own; the same one as the vLLM path (predictor and canary
            # pods carry the model label).
            meta = {"name": isvc_name, "namespace": args.namespace, "labels": pod_labels(plan)}
            pdb = disruption.model_disruption_budget(meta, plan.served_name)
            k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child)
        if args.monitoring:
            pm = pod_monitor(isvc_name, t, args.monitoring_labels)
            custom_resource(f"{name}-podmonitor", pm, args.crds, child)
            # The vLLM path's alerts, SLOs and dashboard over the same engine series; only the pods'
            # names and the container differ (the Target says which).
            thresholds = dataclasses.replace(
                args.alert_thresholds or alerts.AlertThresholds(), queue_per_replica=a.queueThreshold
            )
            objectives = slo.latency_slos(plan.model.slo)
            rule = observability.prometheus_rule(
                isvc_name, t, thresholds, objectives, args.runbook_url, args.monitoring_labels
            )
            custom_resource(f"{name}-alerts", rule, args.crds, child)
            board = dashboard.dashboard_config_map(f"{isvc_name}-dashboard", t, objectives, args.dashboard_namespace)
            k8s.core.v1.ConfigMap(f"{name}-dashboard", metadata=board["metadata"], data=board["data"], opts=child)
        self.prometheus_adapter_rules = scaling.prometheus_adapter_rules() if a.enabled and a.kind == "hpa" else []
        if a.enabled and a.kind == "hpa":
            low, most = plan.replica_bounds
            ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": t.workload_name}
            hpa = scaling.horizontal_pod_autoscaler(
                isvc_name, t, ref, min_replicas=low, max_replicas=most, scale_at=scaling.ScalingTargets.of_model(a)
            )
            k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa",
                metadata=hpa["metadata"],
                spec=hpa["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.inference_service]),
            )
        self.register_outputs(
            {
                "inferenceServiceName": isvc_name,
                "endpoint": self.endpoint,
                "storageUri": self.storage_uri,
                "warnings": self.warnings,
                "prometheusAdapterRules": self.prometheus_adapter_rules,
            }
        )

    def _hf_storage(self, name: str, args: KServeModelArgs, isvc_name: str, child: pulumi.ResourceOptions) -> None:
        """The token Secret and the ClusterStorageContainer that hands it to the storage initializer.

        Without a token (a public model on a stack with no hfToken) neither exists: v0.20's default
        storage container downloads hf:// anonymously.
        """
        plan = args.plan
        if args.hf_token is None:
            if plan.model.gated:
                raise KServeConfigError(
                    f"models[{plan.index}] ({plan.repo}) is gated and served from hf://; set hfToken as secret config"
                )
            return
        self.token_secret = k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata={"name": f"{isvc_name[:54]}-hf-token", "namespace": args.namespace, "labels": pod_labels(plan)},
            type="Opaque",
            # Output.secret keeps the token encrypted in state whatever the caller passed.
            string_data={HF_TOKEN_KEY: pulumi.Output.secret(args.hf_token)},
            opts=child,
        )
        revisions = [plan.revision]
        if args.canary_baseline_revision and plan.model.canaryTrafficPercent is not None:
            revisions.append(args.canary_baseline_revision)
        # Cluster-scoped: the namespace in the name keeps two stacks' containers apart.
        csc = cluster_storage_container(
            f"{args.namespace}-{isvc_name}-hf",
            [hf_uri_regex(plan.repo, r) for r in revisions],
            _name_of(self.token_secret),
            images.mirrored(STORAGE_INITIALIZER_IMAGE, args.image_mirrors),
        )
        self.storage_container = custom_resource(
            f"{name}-hf-storage", csc, args.crds, pulumi.ResourceOptions(parent=self, depends_on=[self.token_secret])
        )
