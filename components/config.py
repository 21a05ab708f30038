"""The stack's configuration: typed, validated once, with errors a person can act on.

This is the only module that reads Pulumi config. Everything downstream receives a `StackConfig`
and can trust it: names are valid Kubernetes names, revisions are commits, pools exist on the
chosen cloud, and secrets came from secret config.

Keys are camelCase in the stack file, as Pulumi's own providers spell theirs
(`llm-serving:models` → `[{repo: ..., maxModelLen: ...}]`). Errors name the stack file and the key
path: `Pulumi.dev.yaml: models[0].revision: "main" is a branch; pin a 40-character commit SHA`.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import contract, gpus
from components.vllm_version import VLLM_IMAGE

PROJECT = "llm-serving"
# Where a stack without cluster.region lives.
DEFAULT_REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}
# The mirror Job's image: it needs the `hf` CLI, which the vLLM image ships with the huggingface_hub
# its release pins. Pinned here on its own, not to VLLM_IMAGE: bumping the engine must not change
# the mirror Jobs' pod templates, which would replace every Job and re-download every model.
DOWNLOADER_IMAGE = "vllm/vllm-openai:v0.32.0"
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
LABEL_KEY_RE = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# Quantization methods vLLM 0.32 accepts for --quantization (vllm/model_executor/layers/quantization).
QUANTIZATION_METHODS = (
    "awq", "awq_marlin", "gptq", "gptq_marlin", "gptq_marlin_24", "fp8", "fbgemm_fp8", "modelopt",
    "modelopt_fp4", "compressed-tensors", "bitsandbytes", "gguf", "experts_int8", "mxfp4", "torchao",
)
# An image reference with a tag or digest; the policy pack enforces "not latest" on the output too.
IMAGE_RE = re.compile(r"^[^\s@]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")

# Config namespaces of the providers and the engine; any other near-miss of PROJECT is a typo.
PROVIDER_NAMESPACES = frozenset({"pulumi", "aws", "gcp", "kubernetes", "random", "tls", "command"})

# Secret config keys: only ever read with require_secret/get_secret, and refused as plain values.
SECRET_KEYS = ("hfToken", "apiKey")


class ConfigError(Exception):
    """A stack configuration problem, already phrased for the person who wrote the stack file."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class _Model(BaseModel):
    # Unknown keys are errors: a typo like `maxModelLenght` must not silently fall back to a default.
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        use_attribute_docstrings=True,
    )


class Cloud(str, Enum):
    aws = "aws"
    gcp = "gcp"
    existing = "existing"


class SystemPoolConfig(_Model):
    machineType: str | None = Field(None, alias="machineType")
    """CPU machine type. Default: m6i.2xlarge on AWS, e2-standard-8 on GCP."""
    minNodes: int = Field(2, ge=1, alias="minNodes")
    """At least one node: CoreDNS, the operators' controllers and the mirror Jobs run here."""
    maxNodes: int = Field(4, ge=1, alias="maxNodes")
    """Upper bound for the autoscaler."""
    diskGib: int = Field(200, ge=50, le=16384, alias="diskGib")
    """Boot disk per node; a mirror Job stages a model's files here when models load from the bucket."""
    zones: list[str] | None = Field(None, min_length=1)
    """GKE: zones of the system pool; default: the region's `-a` zone (`<region>-a`)."""

    @model_validator(mode="after")
    def _sizes(self) -> "SystemPoolConfig":
        if self.minNodes > self.maxNodes:
            raise ValueError(f"minNodes ({self.minNodes}) is greater than maxNodes ({self.maxNodes})")
        return self


class ClusterConfig(_Model):
    create: bool = True
    """Create the cluster (true) or reuse an existing one by name (false). Ignored for `cloud: existing`."""
    name: str = "llm-serving"
    """Cluster name: created with this name, or looked up by it when `create` is false."""
    kubernetesVersion: str = Field("1.33", alias="kubernetesVersion", pattern=r"^1\.\d{2}$")
    """Kubernetes minor version of a created cluster (EKS `version`, GKE `min_master_version`)."""
    region: str | None = None
    """Cloud region (AWS region, GCP region). Defaults: us-east-1 on AWS, us-central1 on GCP."""
    gcpProject: str | None = Field(None, alias="gcpProject")
    """GCP project id. Required on GCP unless `gcp:project` is set for the provider."""
    kubeconfig: str | None = None
    """For `cloud: existing`: path to the kubeconfig to use. Never falls back to the ambient one."""
    context: str | None = None
    """For `cloud: existing`: kubeconfig context to use (default: the file's current context)."""
    rwxStorageClass: str | None = Field(None, alias="rwxStorageClass")
    """StorageClass for the ReadWriteMany model volume. Default: `efs-sc` on EKS, created with an EFS file system and the EFS CSI add-on when unset or `efs-sc` (another name: a class you manage); `standard-rwx` on GKE (Filestore CSI); required for `cloud: existing` unless models load from the bucket or an existing claim."""
    manageRwxStorage: bool | None = Field(None, alias="manageRwxStorage")
    """EKS: create EFS, the EFS CSI add-on and the StorageClass. Default: true when rwxStorageClass is unset or efs-sc; set false when the cluster already has them."""
    systemPool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, alias="systemPool")
    """Untainted CPU nodes of a created cluster (create: true) for everything that is not a GPU server; GPU pools are tainted, so a cluster with only GPU nodes cannot run CoreDNS or the mirror Jobs."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _dns_label(v)


CapacityType = Literal["on-demand", "spot", "capacity-block"]


class PoolConfig(_Model):
    name: str
    """Pool name (DNS label). Models name the pool they run on."""
    gpu: str
    """GPU model from the catalog (components/gpus.py): A10G, L4, L40S, A100-40GB, A100-80GB, H100-80GB, H200, B200."""
    gpusPerNode: int = Field(1, ge=1, le=16, alias="gpusPerNode")
    """GPUs per node. With no `machineType`, the smallest machine with exactly this many GPUs is used."""
    machineType: str | None = Field(None, alias="machineType")
    """EC2 instance type or GCE machine type; must carry this pool's GPU. Default: derived from `gpu` and `gpusPerNode`."""
    minNodes: int = Field(0, ge=0, alias="minNodes")
    """Minimum nodes; 0 lets an idle pool scale to nothing."""
    maxNodes: int = Field(1, ge=1, alias="maxNodes")
    """Maximum nodes the autoscaler may add."""
    desiredNodes: int | None = Field(None, ge=0, alias="desiredNodes")
    """Initial node count (EKS desired size / GKE initial count). Default: `minNodes`."""
    capacityType: CapacityType = Field("on-demand", alias="capacityType")
    """on-demand, spot, or capacity-block (AWS EC2 Capacity Blocks for ML, with capacityReservationId)."""
    capacityReservationId: str | None = Field(None, alias="capacityReservationId", pattern=r"^cr-[0-9a-f]{17}$")
    """AWS: the Capacity Block's reservation id (cr-...); required with capacityType capacity-block."""
    zones: list[str] | None = Field(None, min_length=1)
    """GKE: zones of the pool (node_locations); default: the region's `-a` zone (`<region>-a`), which not every region has. GPUs are not offered in every zone."""
    diskGib: int = Field(200, ge=50, le=16384, alias="diskGib")
    """Root/boot disk per node in GiB; engine images are 10-20 GB and are unpacked there."""
    efa: bool = False
    """AWS: attach Elastic Fabric Adapter interfaces (p4d/p5 families) for multi-node NCCL."""
    gkeDriverVersion: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = Field("LATEST", alias="gkeDriverVersion")
    """GKE: GPU driver version GKE installs on the nodes. INSTALLATION_DISABLED only with operators.gpuOperator.driver `operator` (the pools then run Ubuntu node images)."""
    localSsd: bool = Field(True, alias="localSsd")
    """GKE: use the machine's local SSDs for ephemeral storage (image layers, emptyDirs) where it has them."""
    migProfile: str | None = Field(None, alias="migProfile")
    """MIG profile every GPU of this pool is cut into (e.g. 1g.10gb on H100-80GB), each slice one nvidia.com/gpu; needs operators.gpuOperator.migStrategy single. Profiles per GPU: components/gpus.py MIG_PROFILES."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v == contract.SYSTEM_POOL:
            raise ValueError(f"{v!r} is reserved for the CPU system pool of a created cluster; choose another name")
        return _dns_label(v)

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str) -> str:
        if v not in gpus.CATALOG:
            same_but_case = [name for name in gpus.CATALOG if name.lower() == v.lower()]
            hint = f" (did you mean {same_but_case[0]!r}?)" if same_but_case else _did_you_mean(v, gpus.CATALOG)
            raise ValueError(f"unknown GPU {v!r}{hint}; known GPUs: {', '.join(gpus.CATALOG)}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> "PoolConfig":
        if self.minNodes > self.maxNodes:
            raise ValueError(f"minNodes ({self.minNodes}) is greater than maxNodes ({self.maxNodes})")
        if self.desiredNodes is not None and not self.minNodes <= self.desiredNodes <= self.maxNodes:
            raise ValueError(
                f"desiredNodes ({self.desiredNodes}) must lie between minNodes ({self.minNodes}) "
                f"and maxNodes ({self.maxNodes})"
            )
        return self


def _exact_version(v: str) -> str:
    """Helm matches chart versions literally; a range or `latest` would float."""
    if not re.fullmatch(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", v):
        raise ValueError(f"{v!r} is not an exact chart version; pin one such as 26.4.1 (ranges and latest float)")
    return v


class GpuOperatorConfig(_Model):
    enabled: bool = True
    """Install NVIDIA's GPU Operator (device plugin, GPU feature discovery, DCGM exporter)."""
    chartVersion: str = Field("v26.7.0", alias="chartVersion")
    """Exact gpu-operator Helm chart version from https://helm.ngc.nvidia.com/nvidia."""
    driver: Literal["auto", "operator", "preinstalled"] = "auto"
    """Who installs the driver and container toolkit. auto: preinstalled on EKS (AL2023 NVIDIA AMI) and GKE (GKE-managed drivers); set explicitly for `cloud: existing`."""
    migStrategy: Literal["none", "single", "mixed"] = Field("none", alias="migStrategy")
    """MIG strategy the device plugin advertises (only for MIG-capable GPUs)."""
    timeSlicingReplicas: int | None = Field(None, ge=2, le=64, alias="timeSlicingReplicas")
    """Share each GPU between N pods by time-slicing (dev/test only: no memory isolation)."""
    dcgmServiceMonitor: bool = Field(True, alias="dcgmServiceMonitor")
    """Create a ServiceMonitor for the DCGM exporter (needs the Prometheus Operator CRDs)."""

    @field_validator("chartVersion")
    @classmethod
    def _version(cls, v: str) -> str:
        return _exact_version(v)


class NetworkOperatorConfig(_Model):
    enabled: bool = False
    """Install NVIDIA's Network Operator for RDMA/GPUDirect; needed only when pipeline parallelism crosses nodes."""
    chartVersion: str = Field("26.4.1", alias="chartVersion")
    """Exact network-operator Helm chart version from https://helm.ngc.nvidia.com/nvidia."""
    rdmaSharedDevices: list[str] = Field(default_factory=lambda: ["mlx5_core"], alias="rdmaSharedDevices")
    """Kernel drivers (ifNames/vendors are matched by the RDMA shared device plugin) exposed as rdma/rdma_shared_device_a."""
    ipRange: str = Field("192.168.100.0/24", alias="ipRange")
    """IP range (NVIDIA IPAM pool) of the secondary network NCCL uses."""
    interface: str | None = None
    """Host RDMA NIC (e.g. ens1f0) the secondary network's macvlan sits on; without it no network attachment is created (the CNI would pick the management interface)."""

    @field_validator("chartVersion")
    @classmethod
    def _version(cls, v: str) -> str:
        return _exact_version(v)

    @field_validator("ipRange")
    @classmethod
    def _cidr(cls, v: str) -> str:
        import ipaddress

        try:
            ipaddress.ip_network(v, strict=True)
        except ValueError as err:
            raise ValueError(f"{v!r} is not a network in CIDR form ({err}); e.g. 192.168.100.0/24") from None
        return v


class OperatorsConfig(_Model):
    gpuOperator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig, alias="gpuOperator")
    """NVIDIA GPU Operator."""
    networkOperator: NetworkOperatorConfig = Field(default_factory=NetworkOperatorConfig, alias="networkOperator")
    """NVIDIA Network Operator."""
    namespace: str = "gpu-operator"
    """Namespace of the operators."""

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return _dns_label(v)


LoadFrom = Literal["volume", "bucket", "existing-claim"]


class ModelStoreConfig(_Model):
    namespace: str = "llm-serving"
    """Namespace of the servers, the mirror Jobs and their service accounts."""
    bucketName: str | None = Field(None, alias="bucketName")
    """Model bucket name. Default: `<project>-<stack>-models-<random suffix>` (globally unique)."""
    prefix: str = Field("models", pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
    """Object prefix for mirrored weights, without leading or trailing slash; the writer identity may write only under it."""
    mirrorPool: str | None = Field(None, alias="mirrorPool")
    """Run the mirror Jobs on this GPU pool (tolerating its taint) instead of untainted CPU nodes; for clusters without CPU nodes."""
    loadFrom: LoadFrom = Field("volume", alias="loadFrom")
    """volume: a ReadWriteMany volume the mirror Job fills; bucket: vLLM's Run:ai streamer reads the bucket; existing-claim: a PVC you manage."""
    existingClaim: str | None = Field(None, alias="existingClaim")
    """Name of an existing ReadWriteMany PVC holding `<org>/<name>/<revision>/` folders (loadFrom: existing-claim)."""
    readMBps: float | None = Field(None, gt=0, alias="readMBps")
    """Read speed of the chosen load path in MB/s, for load-time estimates. Default per path: volume 500, bucket 1500, existing-claim 500."""
    downloaderImage: str = Field(DOWNLOADER_IMAGE, alias="downloaderImage")
    """Pinned image for the mirror Job; it must carry the `hf` CLI (the vLLM image does, with the huggingface_hub its release pins), so nothing is pip-installed at run time."""
    volumeHeadroom: float = Field(1.25, ge=1.0, le=4.0, alias="volumeHeadroom")
    """Volume size = total weight size x headroom: room for the tokenizer, configs, the manifest and download bookkeeping. It does not hold a second revision: the claim keeps its creation size (docs/model-store.md), so grow it before mirroring another commit on a class that enforces sizes."""

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return _dns_label(v)

    @field_validator("bucketName")
    @classmethod
    def _bucket(cls, v: str | None) -> str | None:
        # The rules S3 and GCS share: 3-63 characters, lower case, digits, dots and hyphens.
        if v is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", v):
            raise ValueError(f"{v!r} is not a valid bucket name; use 3-63 lower-case letters, digits, '.' or '-'")
        return v

    @model_validator(mode="after")
    def _claim(self) -> "ModelStoreConfig":
        if self.loadFrom == "existing-claim" and not self.existingClaim:
            raise ValueError("loadFrom is existing-claim but existingClaim is not set; name the PVC")
        return self


class AutoscalingConfig(_Model):
    enabled: bool = False
    """Scale replicas on vLLM's queue depth (vllm:num_requests_waiting)."""
    kind: Literal["keda", "hpa"] = "keda"
    """keda: a KEDA ScaledObject on a Prometheus query; hpa: an HPA on the same signal via an external metrics adapter."""
    minReplicas: int = Field(1, ge=0, alias="minReplicas")
    """Replicas kept warm; a cold start costs the full load time."""
    maxReplicas: int = Field(4, ge=1, alias="maxReplicas")
    """Upper bound of replicas."""
    queueThreshold: float = Field(5, gt=0, alias="queueThreshold")
    """Waiting requests per replica that trigger a scale-up."""
    prometheusUrl: str = Field("http://prometheus-operated.monitoring.svc:9090", alias="prometheusUrl")
    """Prometheus that scrapes the servers (KEDA's query target)."""


class GatewayConfig(_Model):
    name: str
    """Name of the Gateway API Gateway the HTTPRoutes attach to (it must allow routes from the serving namespace)."""
    namespace: str
    """Namespace of that Gateway."""
    hostname: str | None = None
    """Hostname the routes match; default: any hostname the Gateway's listener accepts."""


class ExposureConfig(_Model):
    gateway: GatewayConfig | None = None
    """Expose each model as https://<hostname>/<model>/v1 (and /<model>/health) through an HTTPRoute on this Gateway (default: ClusterIP Services only)."""


class MonitoringConfig(_Model):
    enabled: bool = True
    """Create ServiceMonitors, PrometheusRules and Grafana dashboards (needs the Prometheus Operator CRDs)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels your Prometheus' serviceMonitorSelector/ruleSelector match, e.g. {release: kube-prometheus-stack}."""

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not LABEL_KEY_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid Kubernetes label key")
            if not LABEL_VALUE_RE.fullmatch(value):
                raise ValueError(f"{value!r} (label {key}) is not a valid Kubernetes label value")
        return v
    dashboardNamespace: str | None = Field(None, alias="dashboardNamespace")
    """Namespace the Grafana sidecar watches for dashboard ConfigMaps; default: the serving namespace."""
    ttftP95Seconds: float = Field(2.0, gt=0, alias="ttftP95Seconds")
    """Alert when the p95 time to first token stays above this many seconds."""
    kvCacheUsageAlert: float = Field(0.95, gt=0, le=1, alias="kvCacheUsageAlert")
    """Alert when KV-cache usage stays above this fraction (requests start to queue or be preempted)."""


TensorParallel = Union[Literal["auto"], Annotated[int, Field(ge=1, le=64)]]


class ModelConfig(_Model):
    repo: str
    """Hugging Face Hub repo id, `org/name`."""
    revision: str
    """The 40-character commit SHA to serve. Branches and tags move; a commit proves which bytes are served."""
    name: str | None = None
    """Served model name and Kubernetes name (DNS label). Default: the repo name, lower-cased."""
    gated: bool = False
    """The repo needs an accepted licence and an HF token (set `hfToken` as secret config)."""
    engine: Literal["vllm", "kserve"] = "vllm"
    """vllm: a Deployment/LeaderWorkerSet running `vllm serve`; kserve: a KServe InferenceService."""
    pool: str
    """Name of the GPU pool (in `pools`) the servers run on."""
    tensorParallelSize: TensorParallel = Field("auto", alias="tensorParallelSize")
    """GPUs one replica shards the model across inside a node, or `auto` for the smallest size that fits."""
    pipelineParallelSize: int = Field(1, ge=1, le=64, alias="pipelineParallelSize")
    """Pipeline stages; more than one spreads a replica across nodes (needs RDMA to be fast)."""
    maxModelLen: int | None = Field(None, ge=16, alias="maxModelLen")
    """Longest prompt + output in tokens. Default: the model's own maximum (max_position_embeddings)."""
    gpuMemoryUtilization: float = Field(0.9, gt=0.05, le=0.99, alias="gpuMemoryUtilization")
    """Share of each GPU's memory vLLM may take (weights + activations + KV cache)."""
    kvCacheDtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field("auto", alias="kvCacheDtype")
    """KV-cache element type; fp8 halves KV memory (needs compute capability 8.9+ to be fast)."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """Activation/weight dtype; auto takes the checkpoint's."""
    quantization: str | None = None
    """Weight quantization method passed to vLLM (fp8, awq, gptq, ...); default: what the checkpoint declares."""
    replicas: int = Field(1, ge=1, le=100)
    """Serving replicas (each is TP x PP GPUs)."""
    image: str = VLLM_IMAGE
    """Engine image, pinned by tag (not latest) or digest."""
    maxNumSeqs: int | None = Field(None, ge=1, alias="maxNumSeqs")
    """vLLM --max-num-seqs; default: vLLM's."""
    maxNumBatchedTokens: int | None = Field(None, ge=16, alias="maxNumBatchedTokens")
    """vLLM --max-num-batched-tokens; changes peak activation memory and so KV capacity."""
    enablePrefixCaching: bool = Field(True, alias="enablePrefixCaching")
    """Reuse KV cache across requests that share a prefix (system prompts, chat history)."""
    chatTemplate: str | None = Field(None, alias="chatTemplate")
    """A Jinja chat template for models that ship none; ignored (with a warning) when the model has one."""
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig)
    """Queue-depth autoscaling."""
    updateStrategy: Literal["auto", "RollingUpdate", "Recreate"] = Field("auto", alias="updateStrategy")
    """auto: RollingUpdate (never below the serving replicas) when the pool can hold one more replica, else Recreate."""
    canaryTrafficPercent: int | None = Field(None, ge=0, le=100, alias="canaryTrafficPercent")
    """KServe only: share of traffic `revision` takes as a canary; needs `canaryBaselineRevision` (the commit serving the rest)."""
    canaryBaselineRevision: str | None = Field(None, alias="canaryBaselineRevision")
    """KServe only: the 40-character commit now serving. With canaryTrafficPercent it stays the stable predictor while `revision` runs as the canary; promote by setting it to `revision` or removing canaryTrafficPercent."""
    kserveStorage: Literal["bucket", "hf"] = Field("bucket", alias="kserveStorage")
    """KServe only: where the storage initializer fetches weights. bucket: the mirrored s3:// or gs:// folder of the pinned commit (pvc:// of the model volume without a bucket); hf: hf://<repo>:<revision> from the Hub, the token handed over through a ClusterStorageContainer."""

    @field_validator("repo")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not REPO_ID_RE.match(v):
            raise ValueError(f"{v!r} is not a Hub repo id; write it as `org/name`, e.g. Qwen/Qwen2.5-7B-Instruct")
        return v

    @field_validator("revision", "canaryBaselineRevision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if COMMIT_RE.match(v):
            return v
        if re.fullmatch(r"[0-9a-fA-F]{40}", v):
            raise ValueError(f"{v!r} has upper-case letters; write the commit SHA in lower case")
        if re.fullmatch(r"[0-9a-f]{7,39}", v):
            raise ValueError(f"{v!r} is a short SHA; pin the full 40-character commit SHA "
                             "(the Hub shows it under 'Files and versions' > 'History')")
        raise ValueError(
            f"{v!r} is a branch or tag; pin a 40-character commit SHA "
            "(the Hub shows it under 'Files and versions' > 'History')"
        )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else _dns_label(v)

    @field_validator("quantization")
    @classmethod
    def _quantization(cls, v: str | None) -> str | None:
        if v is not None and v not in QUANTIZATION_METHODS:
            hint = _did_you_mean(v, QUANTIZATION_METHODS)
            raise ValueError(f"{v!r} is not a vLLM quantization method{hint}; known: {', '.join(QUANTIZATION_METHODS)}")
        return v

    @field_validator("tensorParallelSize", mode="before")
    @classmethod
    def _tp(cls, v: Any) -> Any:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64):
            return v
        raise ValueError(f"{v!r} is not allowed; use `auto` or a whole number of GPUs from 1 to 64")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        return validate_image(v)

    @property
    def served_name(self) -> str:
        return self.name or default_model_name(self.repo)

    @model_validator(mode="after")
    def _replicas(self) -> "ModelConfig":
        a = self.autoscaling
        if a.enabled and a.minReplicas > a.maxReplicas:
            raise ValueError(f"autoscaling.minReplicas ({a.minReplicas}) exceeds maxReplicas ({a.maxReplicas})")
        if a.enabled and "replicas" in self.model_fields_set:
            raise ValueError("replicas is decided by the autoscaler when autoscaling is enabled; "
                             "set autoscaling.minReplicas and maxReplicas instead")
        kserve_only = {"canaryTrafficPercent": self.canaryTrafficPercent, "canaryBaselineRevision": self.canaryBaselineRevision,
                       "kserveStorage": None if self.kserveStorage == "bucket" else self.kserveStorage}
        for key, value in kserve_only.items():
            if value is not None and self.engine != "kserve":
                raise ValueError(f"{key} applies to engine: kserve only")
        if self.canaryTrafficPercent is not None and self.canaryBaselineRevision is None:
            raise ValueError("canaryTrafficPercent needs canaryBaselineRevision, the commit that keeps serving the rest")
        return self


class StackConfig(_Model):
    cloud: Cloud
    """Where the cluster lives: aws (EKS), gcp (GKE) or existing (any cluster reached through a kubeconfig)."""
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """The Kubernetes cluster."""
    pools: list[PoolConfig] = Field(min_length=1)
    """GPU node pools."""
    operators: OperatorsConfig = Field(default_factory=OperatorsConfig)
    """NVIDIA operators."""
    modelStore: ModelStoreConfig = Field(default_factory=ModelStoreConfig, alias="modelStore")
    """Where mirrored weights live and how servers read them."""
    models: list[ModelConfig] = Field(min_length=1)
    """Models to serve."""
    exposure: ExposureConfig = Field(default_factory=ExposureConfig)
    """How clients outside the cluster reach the models."""
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)
    """Prometheus Operator objects and Grafana dashboards for the servers."""

    @model_validator(mode="after")
    def _cross_checks(self) -> "StackConfig":
        problems: list[tuple[str, str]] = []
        pool_names = [p.name for p in self.pools]
        for dup in sorted({n for n in pool_names if pool_names.count(n) > 1}):
            problems.append(("pools", f"pool name {dup!r} is used twice; pool names must be unique"))
        for i, pool in enumerate(self.pools):
            problems += [(f"pools[{i}].{k}", m) for k, m in _pool_problems(self.cloud, pool)]
        served = [m.served_name for m in self.models]
        for dup in sorted({n for n in served if served.count(n) > 1}):
            problems.append(("models", f"two models are served as {dup!r}; give one a distinct `name`"))
        for i, model in enumerate(self.models):
            if model.pool not in pool_names:
                hint = _did_you_mean(model.pool, pool_names)
                problems.append((f"models[{i}].pool", f"no pool named {model.pool!r}{hint}; pools: {', '.join(pool_names)}"))
        if self.modelStore.mirrorPool is not None and self.modelStore.mirrorPool not in pool_names:
            problems.append(("modelStore.mirrorPool", f"no pool named {self.modelStore.mirrorPool!r}; pools: {', '.join(pool_names)}"))
        if self.cloud == Cloud.gcp and len(self.cluster.name) > 40:
            problems.append(("cluster.name", f"GKE cluster names have at most 40 characters; {self.cluster.name!r} has {len(self.cluster.name)}"))
        for i, m in enumerate(self.models):
            if m.autoscaling.enabled and not self.monitoring.enabled:
                problems.append((f"models[{i}].autoscaling.enabled", "autoscaling reads the queue depth Prometheus scrapes "
                                                                     "from the servers; it needs monitoring.enabled true"))
        problems += _zone_problems(self)
        system_type = self.cluster.systemPool.machineType
        if system_type and self.cloud != Cloud.existing and gpus.find_machine(self.cloud.value, system_type):
            gpu, machine = gpus.find_machine(self.cloud.value, system_type)
            problems.append(("cluster.systemPool.machineType",
                             f"{system_type} is a GPU machine type ({machine.gpus} x {gpu.name}); the system pool "
                             "runs untainted CPU work, so use a CPU type or leave it unset"))
        if self.cloud == Cloud.existing and self.modelStore.loadFrom == "volume" and not self.cluster.rwxStorageClass:
            problems.append((
                "cluster.rwxStorageClass",
                "cloud is existing and models load from a volume, so name the cluster's ReadWriteMany StorageClass",
            ))
        if self.cloud == Cloud.existing and self.modelStore.loadFrom == "bucket":
            problems.append(("modelStore.loadFrom", "bucket loading needs a cloud bucket; use volume or existing-claim on an existing cluster"))
        problems += _operator_problems(self)
        if self.cloud == Cloud.existing and not self.cluster.kubeconfig:
            problems.append(("cluster.kubeconfig", "cloud is existing: give the kubeconfig path (the ambient kubeconfig is never used by accident)"))
        if problems:
            raise _CrossCheckError(problems)
        return self

    def pool(self, name: str) -> PoolConfig:
        return next(p for p in self.pools if p.name == name)

    @property
    def region(self) -> str | None:
        """The cloud region (cluster.region or the cloud's default), None for an existing cluster."""
        return self.cluster.region or DEFAULT_REGIONS.get(self.cloud.value)

    @property
    def gke_driver_version(self) -> str | None:
        """The GPU driver version of the GKE pools (validated to be one), None off GKE."""
        return self.pools[0].gkeDriverVersion if self.cloud == Cloud.gcp else None


def _pool_problems(cloud: Cloud, pool: PoolConfig) -> list[tuple[str, str]]:
    """Checks that need the cloud: machine types, GPU counts and EFA against the catalog."""
    gpu = gpus.CATALOG[pool.gpu]
    if cloud == Cloud.existing:
        # Nothing is created on an existing cluster, so options that shape cloud nodes do nothing.
        cloud_only = {"efa": pool.efa, "capacityReservationId": pool.capacityReservationId,
                      "machineType": pool.machineType, "zones": pool.zones}
        return [(key, "applies to pools this program creates on aws or gcp; remove it for cloud existing")
                for key, value in cloud_only.items() if value]
    cloud_name = cloud.value
    offered = gpu.machines(cloud_name)
    if not offered:
        clouds = [c for c in ("aws", "gcp") if gpu.machines(c)]
        others = [g.name for g in gpus.CATALOG.values() if g.machines(cloud_name)]
        return [("gpu", f"{pool.gpu} is not offered on {cloud_name} (only on {', '.join(clouds) or 'no cloud in the catalog'}); "
                        f"GPUs on {cloud_name}: {', '.join(others)}")]
    problems = []
    if pool.machineType is not None:
        found = gpus.find_machine(cloud_name, pool.machineType)
        if found is None:
            problems.append(("machineType", f"{pool.machineType!r} is not a GPU machine type on {cloud_name}; "
                                            f"{pool.gpu} machines: {', '.join(m.name for m in offered)}"))
            return problems
        machine_gpu, machine = found
        if machine_gpu.name != pool.gpu:
            problems.append(("machineType", f"{pool.machineType} carries {machine_gpu.name}, not {pool.gpu}"))
        elif pool.gpusPerNode != machine.gpus:
            # The cloud attaches all of a machine's GPUs; planning for fewer would leave GPUs idle
            # and every capacity number wrong.
            problems.append(("gpusPerNode", f"{pool.machineType} has {machine.gpus} GPU(s); set gpusPerNode to "
                                            f"{machine.gpus} or drop machineType"))
    else:
        machine = gpus.default_machine(gpu, cloud_name, pool.gpusPerNode)
        if machine is None:
            counts = sorted({m.gpus for m in offered})
            problems.append(("gpusPerNode", f"no {cloud_name} machine has {pool.gpusPerNode} x {pool.gpu}; choose one of {counts}"))
    if pool.capacityType == "capacity-block":
        if cloud != Cloud.aws:
            problems.append(("capacityType", "capacity-block is an AWS EC2 Capacity Block; on gcp use on-demand or spot"))
        elif not pool.capacityReservationId:
            problems.append(("capacityReservationId", "capacityType is capacity-block: give the Capacity Block's "
                                                      "reservation id (cr-...) from the EC2 console"))
    elif pool.capacityReservationId:
        problems.append(("capacityReservationId", "only used with capacityType capacity-block"))
    if pool.zones and cloud != Cloud.gcp:
        problems.append(("zones", "zones are set per pool on GKE only; on EKS node groups use the cluster's subnets"))
    if pool.efa:
        if cloud != Cloud.aws:
            problems.append(("efa", "EFA is an AWS feature; remove it on gcp"))
        elif machine is not None and not machine.efa:
            efa_types = [m.name for g in gpus.CATALOG.values() for m in g.aws if m.efa]
            problems.append(("efa", f"{machine.name} does not support EFA; EFA instance types: {', '.join(efa_types)}"))
    return problems


def _zone_problems(stack: "StackConfig") -> list[tuple[str, str]]:
    """GKE pools' zones: in the cluster's region, and an initial size the zones can start."""
    system = stack.cluster.systemPool
    if stack.cloud != Cloud.gcp:
        return [("cluster.systemPool.zones", "zones apply to GKE only")] if system.zones else []
    # An existing zonal cluster's region is itself a zone; its pools may name that zone.
    region = stack.region or ""
    pools = [(f"pools[{i}]", p.zones, p.desiredNodes if p.desiredNodes is not None else p.minNodes, p.maxNodes)
             for i, p in enumerate(stack.pools)]
    if stack.cluster.create:
        pools.append(("cluster.systemPool", system.zones, system.minNodes, system.maxNodes))
    problems = []
    for where, zones, initial, max_nodes in pools:
        for zone in zones or []:
            if not zone.startswith(f"{region}-") and zone != region:
                problems.append((f"{where}.zones", f"{zone!r} is not in region {region}; list zones of {region}"))
        count = len(zones) if zones else 1
        per_zone = -(-initial // count)
        if per_zone * count > max_nodes:
            problems.append((f"{where}.zones", f"GKE starts the same number of nodes in each zone, so {initial} node(s) "
                                               f"over {count} zones start {per_zone * count}, more than maxNodes "
                                               f"({max_nodes}); raise maxNodes to {per_zone * count} or list fewer zones"))
    return problems


def _operator_problems(stack: "StackConfig") -> list[tuple[str, str]]:
    """Operator options that cannot work with the chosen cloud, node images, pools and models.

    Driver mode, MIG strategy and time-slicing on GKE are decided by the operators' own decision
    functions (components/operators/values.py), so the config refuses exactly what the chart
    values and the GKE node pools would not serve.
    """
    # Imported here: the operators package imports this module (OperatorsConfig).
    from components.operators import values as operator_values

    gpu_op = stack.operators.gpuOperator
    problems: list[tuple[str, str]] = []
    versions = sorted({p.gkeDriverVersion for p in stack.pools})
    if stack.cloud == Cloud.gcp and len(versions) > 1:
        problems.append(("pools", f"all GKE pools must use one gkeDriverVersion (the GPU Operator is configured "
                                  f"once for the cluster); found {', '.join(versions)}"))
    if stack.cloud == Cloud.gcp and not gpu_op.enabled and operator_values.GKE_INSTALLATION_DISABLED in versions:
        first = next(i for i, p in enumerate(stack.pools) if p.gkeDriverVersion == operator_values.GKE_INSTALLATION_DISABLED)
        problems.append((f"pools[{first}].gkeDriverVersion", "INSTALLATION_DISABLED needs the GPU Operator to install "
                                                             "the driver, but operators.gpuOperator.enabled is false; "
                                                             "use LATEST or DEFAULT"))
    if gpu_op.enabled:
        gke_version = versions[0] if stack.cloud == Cloud.gcp and len(versions) == 1 else None
        for err in operator_values.gpu_operator_problems(stack.cloud.value, gpu_op.driver, gpu_op, gke_version):
            key = err.key
            if key == operator_values.GKE_DRIVER_VERSION_KEY:
                first = next(i for i, p in enumerate(stack.pools) if p.gkeDriverVersion == gke_version)
                key = f"pools[{first}].gkeDriverVersion"
            problems.append((key, err.message))
    problems += _mig_problems(stack)
    if stack.cloud == Cloud.aws and stack.operators.networkOperator.enabled:
        problems.append(("operators.networkOperator.enabled", "on EKS, multi-node NCCL goes over EFA (pools[].efa), "
                                                              "not the Network Operator; turn it off"))
    replicas = gpu_op.timeSlicingReplicas if gpu_op.enabled else None
    if replicas:
        for i, m in enumerate(stack.models):
            if isinstance(m.tensorParallelSize, int) and m.tensorParallelSize * m.pipelineParallelSize > 1:
                problems.append((f"models[{i}].tensorParallelSize", "GPU time-slicing gives each pod one shared GPU; "
                                                                    "a model sharded across GPUs cannot run on it"))
            # N pods share one GPU's memory; vLLM refuses to start when the free memory is below its
            # share, and CUDA contexts need the rest.
            if m.gpuMemoryUtilization * replicas > TIME_SLICED_MEMORY_LIMIT:
                largest = math.floor(TIME_SLICED_MEMORY_LIMIT / replicas * 100) / 100
                problems.append((f"models[{i}].gpuMemoryUtilization",
                                 f"{m.gpuMemoryUtilization} x {replicas} pods per GPU "
                                 f"(operators.gpuOperator.timeSlicingReplicas) exceeds {TIME_SLICED_MEMORY_LIMIT} of "
                                 f"the GPU's memory; set it to at most {largest}"))
    return problems


# Share of a time-sliced GPU's memory all its pods together may claim.
TIME_SLICED_MEMORY_LIMIT = 0.95


def _mig_problems(stack: "StackConfig") -> list[tuple[str, str]]:
    """MIG slices reach the servers only as nvidia.com/gpu under the single strategy, one slice per pod."""
    gpu_op = stack.operators.gpuOperator
    single = gpu_op.enabled and gpu_op.migStrategy == "single"
    problems: list[tuple[str, str]] = []
    mig_pools = set()
    for i, pool in enumerate(stack.pools):
        profiles = gpus.MIG_PROFILES.get(pool.gpu, {})
        key = f"pools[{i}].migProfile"
        if pool.migProfile is None:
            if single and profiles:
                problems.append((key, f"operators.gpuOperator.migStrategy is single: name the MIG profile this "
                                      f"pool's {pool.gpu} GPUs are cut into, one of {', '.join(profiles)}"))
            continue
        if not single:
            problems.append((key, "needs operators.gpuOperator.enabled with migStrategy single"))
        elif not profiles:
            problems.append((key, f"{pool.gpu} has no MIG profiles in the catalog; remove migProfile"))
        elif pool.migProfile not in profiles:
            hint = _did_you_mean(pool.migProfile, profiles)
            problems.append((key, f"{pool.migProfile!r} is not a MIG profile of {pool.gpu}{hint}; "
                                  f"use one of {', '.join(profiles)}"))
        else:
            mig_pools.add(pool.name)
    for i, m in enumerate(stack.models):
        if m.pool in mig_pools and isinstance(m.tensorParallelSize, int) and m.tensorParallelSize * m.pipelineParallelSize > 1:
            problems.append((f"models[{i}].tensorParallelSize", f"pool {m.pool} serves MIG slices and a container "
                                                                "sees one slice; use 1 (or a pool without migProfile)"))
    return problems


def pool_machine(cloud: Cloud, pool: PoolConfig) -> gpus.CloudMachine | None:
    """The machine a validated pool runs on (None on an existing cluster)."""
    if cloud == Cloud.existing:
        return None
    if pool.machineType:
        found = gpus.find_machine(cloud.value, pool.machineType)
        return found[1] if found else None
    return gpus.default_machine(gpus.CATALOG[pool.gpu], cloud.value, pool.gpusPerNode)


class _CrossCheckError(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


def default_model_name(repo: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct` (a valid DNS label)."""
    name = re.sub(r"[^a-z0-9-]+", "-", repo.split("/")[-1].lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if not name or not name[0].isalpha():
        name = f"m-{name}"
    return name[:63].rstrip("-")


def validate_image(v: str) -> str:
    if not IMAGE_RE.match(v) or ("@" not in v and ":" not in v.rsplit("/", 1)[-1]):
        raise ValueError(f"{v!r} has no tag or digest; pin it, e.g. vllm/vllm-openai:v0.32.0 or an @sha256: digest")
    tag = v.rsplit("/", 1)[-1].split("@")[0].partition(":")[2]
    if tag == "latest" and "@" not in v:
        raise ValueError(f"{v!r} uses the floating tag latest; pin a version tag or an @sha256: digest")
    return v


def _dns_label(v: str) -> str:
    if not DNS_LABEL_RE.match(v):
        raise ValueError(
            f"{v!r} is not a valid name; use lower-case letters, digits and '-', starting with a letter, at most 63 characters"
        )
    return v


def _did_you_mean(value: str, options) -> str:
    close = difflib.get_close_matches(value, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------------------------------------
# Turning pydantic's errors into one line per problem, naming the key path as the user wrote it.


def _loc_to_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif str(part).startswith(("function-after", "function-before", "tagged-union")):
            continue
        elif part in ("int", "literal['auto']", "constrained-int"):
            continue
        else:
            path += f".{part}" if path else str(part)
    return path


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Aliases accepted at the location of an unknown key, for a 'did you mean' hint."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    if current is None:
        return []
    return [f.alias or n for n, f in current.model_fields.items()]


def format_validation_error(err: ValidationError) -> list[str]:
    problems: list[str] = []
    for e in err.errors():
        loc = tuple(e["loc"])
        ctx_error = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _CrossCheckError):
            prefix = _loc_to_path(loc)
            for key, msg in ctx_error.problems:
                problems.append(f"{prefix + '.' if prefix else ''}{key}: {msg}")
            continue
        path = _loc_to_path(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            known = _known_keys(StackConfig, loc)
            key = str(loc[-1])
            hint = _did_you_mean(key, known)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
                # An empty or odd key cannot be shown as a path; name its parent and quote it.
                path = _loc_to_path(loc[:-1]) or "(top level)"
                hint = f" {key!r}{hint}"
            problems.append(f"{path}: unknown key{hint}; allowed here: {', '.join(known)}")
        elif e["type"] == "missing":
            problems.append(f"{path}: required key is missing")
        elif e["type"] == "value_error":
            problems.append(f"{path}: {str(ctx_error or e['msg']).removeprefix('Value error, ')}")
        elif e["type"] in ("literal_error", "enum"):
            problems.append(f"{path}: {e['input']!r} is not allowed; {e['msg'].removeprefix('Input should be ').replace('should be', 'use')}".replace(
                f"{e['input']!r} is not allowed; ", f"{e['input']!r} is not allowed; use "))
        else:
            problems.append(f"{path}: {e['msg']} (got {e['input']!r})" if "input" in e and not isinstance(e["input"], (dict, list)) else f"{path}: {e['msg']}")
    # A union (tensorParallelSize: "auto" | int) reports once per branch; keep one line per path.
    seen: dict[str, str] = {}
    for p in problems:
        seen.setdefault(p.split(": ", 1)[0], p)
    return list(seen.values())


def parse_stack_config(raw: dict[str, Any], source: str) -> StackConfig:
    """Validate the project's config keys (namespace already stripped) into a StackConfig.

    `source` names the stack file in every message, so a person knows where to look.
    """
    if not isinstance(raw, dict):
        raise ConfigError([f"{source}: the config must be a mapping of keys, got {type(raw).__name__}"])
    plain = {k: v for k, v in raw.items() if k not in SECRET_KEYS}
    try:
        return StackConfig.model_validate(plain)
    except ValidationError as err:
        raise ConfigError([f"{source}: {p}" for p in format_validation_error(err)]) from None


def decode_config_values(values: dict[str, str], secret_keys: set[str], stack: str = "<stack>") -> tuple[dict[str, Any], list[str]]:
    """Pulumi hands structured config over as JSON strings; decode them, keeping plain strings."""
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for full_key, value in values.items():
        namespace, _, key = full_key.partition(":")
        if namespace != PROJECT:
            # Other namespaces belong to providers (aws:region, gcp:project, ...); one that is
            # nearly this project's name is a typo whose keys would otherwise vanish silently.
            if namespace not in PROVIDER_NAMESPACES and _did_you_mean(namespace, [PROJECT]):
                problems.append(f"{full_key}: unknown namespace {namespace!r}{_did_you_mean(namespace, [PROJECT])}")
            continue
        if key in SECRET_KEYS:
            if full_key not in secret_keys:
                problems.append(
                    f"{key}: is set as plain text; secrets must be encrypted: `pulumi config rm {key} && "
                    f"pulumi config set --secret {key} <value> -s {stack}` (and rotate it if the stack file was shared)"
                )
            continue
        try:
            raw[key] = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            raw[key] = value
    return raw, problems


def load() -> "LoadedConfig":
    """Read and validate the running stack's config (the program's single entry point)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    stack = pulumi.get_stack()
    source = f"Pulumi.{stack}.yaml"
    # Every key of the stack (not only known ones), so a misspelt top-level key is reported
    # instead of silently ignored. The SDK keeps them in this map; PULUMI_CONFIG is its fallback.
    values = {k: v for k, v in runtime_config.CONFIG.get().items()}
    for k, v in runtime_config.get_config_env().items():
        values.setdefault(k, v)
    secret_keys = {k for k in values if runtime_config.is_config_secret(k)}
    secret_keys |= set(runtime_config.get_config_secret_keys_env())
    raw, problems = decode_config_values(values, secret_keys, stack)
    problems = [f"{source}: {p}" for p in problems]
    try:
        stack_config = parse_stack_config(raw, source)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    cfg = pulumi.Config(PROJECT)
    hf_token = cfg.get_secret("hfToken")
    api_key = cfg.get_secret("apiKey")
    gated = [f"models[{i}] ({m.repo})" for i, m in enumerate(stack_config.models) if m.gated]
    if gated and hf_token is None:
        named = ", ".join(gated[:3]) + (f" and {len(gated) - 3} more" if len(gated) > 3 else "")
        raise ConfigError([
            f"{source}: hfToken: {named} {'is' if len(gated) == 1 else 'are'} gated and need"
            f"{'s' if len(gated) == 1 else ''} a Hugging Face token; set it with "
            f"`pulumi config set --secret hfToken hf_... -s {stack}`"
        ])
    hub_token = values.get(f"{PROJECT}:hfToken")
    if hub_token is not None and hub_token.startswith("<secret "):
        hub_token = None  # the offline plan's stand-in for a value only the CLI can decrypt
    return LoadedConfig(stack=stack, source=source, config=stack_config, hf_token=hf_token,
                        api_key=api_key, hub_token=hub_token)


class LoadedConfig:
    """The validated config plus the secrets, which stay pulumi Output secrets end to end."""

    def __init__(self, stack: str, source: str, config: StackConfig, hf_token, api_key, hub_token=None):
        self.stack = stack
        self.source = source
        self.config = config
        # Output secrets: what resources receive.
        self.hf_token = hf_token
        self.api_key = api_key
        # The same HF token as a plain string, for one purpose only: authenticating the Hub
        # download of a gated model's config.json while planning. It never reaches a resource.
        self.hub_token = hub_token
