"""One model to serve: which commit, on which pool, with which engine options."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from common import contract, engine_metrics
from common.alerting import lowest_alertable_objective
from common.engine import QUANTIZATION_METHODS, VLLM_IMAGE, VLLM_VERSION
from common.untrusted import excerpt
from stack_config.base import StrictModel
from stack_config.fields import (
    MAX_ENTRIES,
    MAX_REPLICAS,
    MAX_TOKENS,
    HttpUrl,
    PemPublic,
    PrintableName,
    RepoId,
    RepoPath,
)
from stack_config.formats import (
    URL_MAX,
    default_model_name,
    did_you_mean,
    dns_label,
    model_alias,
    pinned_commit,
    validate_image,
)

# The most waiting requests per replica a queue threshold may name: a server's whole batch is far smaller.
MAX_QUEUE_THRESHOLD = 10_000


class AutoscalingConfig(StrictModel):
    enabled: bool = False
    """Scale replicas on whichever saturates first: vLLM's queue depth (vllm:num_requests_waiting) or its KV-cache usage
    (vllm:kv_cache_usage_perc)."""
    kind: Literal["keda", "hpa"] = "keda"
    """keda: a KEDA ScaledObject with a Prometheus trigger per signal; hpa: an HPA on the same two signals via an
    external metrics adapter."""
    minReplicas: int = Field(1, ge=0, le=MAX_REPLICAS, alias="minReplicas")
    """Replicas kept warm; a cold start costs the full load time. Unset with a predicted `load`: the replicas at trough
    (at least 1)."""
    maxReplicas: int = Field(4, ge=1, le=MAX_REPLICAS, alias="maxReplicas")
    """Upper bound of replicas. Unset with a predicted `load`: the replicas at peak."""
    queueThreshold: float = Field(5, gt=0, le=MAX_QUEUE_THRESHOLD, alias="queueThreshold")
    """Waiting requests per replica that trigger a scale-up (at most 10,000: a server's whole batch is far smaller).
    Unset with a predicted `load`: the queue at which waiting spends the TTFT headroom at the SLO (docs/capacity.md)."""
    kvCacheThreshold: float = Field(0.8, gt=0, le=1, alias="kvCacheThreshold")
    """Average KV-cache usage per replica (0..1) that triggers a scale-up, before requests queue for cache blocks or get
    preempted."""
    prometheusUrl: HttpUrl = Field(contract.PROMETHEUS_URL, max_length=URL_MAX, alias="prometheusUrl")
    """Prometheus that scrapes the servers (KEDA's query target). Default: the Prometheus the program installs on a
    cluster it creates; on an existing cluster, set your Prometheus' URL."""


class LatencyObjective(StrictModel):
    """A latency SLO on one of vLLM's histograms: `objective` of the observations within `seconds`.

    The SLO counts the observations under the threshold from the histogram's cumulative bucket
    `le=<seconds>`, so the threshold must be one of the bucket bounds the pinned vLLM exports
    (common/engine_metrics.py). Below the objective `lowest_alertable_objective()` the fastest
    burn-rate page would need more than 100% errors and could never fire.
    """

    histogram: ClassVar[str]

    @field_validator("seconds", check_fields=False)
    @classmethod
    def _bucket_bound(cls, v: float) -> float:
        bounds = engine_metrics.HISTOGRAM_BUCKETS[cls.histogram]
        if v not in bounds:
            below = max((b for b in bounds if b < v), default=None)
            above = min((b for b in bounds if b > v), default=None)
            nearest = " or ".join(f"{b:g}" for b in (below, above) if b is not None)
            raise ValueError(
                f"{v:g} s is not a bucket bound of {cls.histogram} in vLLM {VLLM_VERSION}, so no series counts the "
                f"requests under it; use a bound (nearest: {nearest}); bounds: {', '.join(f'{b:g}' for b in bounds)}"
            )
        return v

    @field_validator("objective", check_fields=False)
    @classmethod
    def _reachable(cls, v: float) -> float:
        lowest = lowest_alertable_objective()
        if not lowest < v < 1:
            fastest = 1 / (1 - lowest)
            raise ValueError(
                f"{v:g} must be above {lowest:.4f} and below 1: the error budget is 1 - objective, and the fastest "
                f"burn-rate page fires at {fastest:g} x the budget, which must stay below 100% errors; "
                "e.g. 0.99 or 0.995"
            )
        return v


class TimeToFirstTokenObjective(LatencyObjective):
    histogram: ClassVar[str] = engine_metrics.TIME_TO_FIRST_TOKEN
    seconds: float = 2.5
    """Time to first token a request should not exceed (a bucket bound of vllm:time_to_first_token_seconds: ..., 1, 2.5,
    5, 7.5, 10, ...)."""
    objective: float = 0.99
    """Share of requests, over 30 days, whose first token arrives within `seconds`."""


class InterTokenLatencyObjective(LatencyObjective):
    histogram: ClassVar[str] = engine_metrics.INTER_TOKEN_LATENCY
    seconds: float = 0.1
    """Gap between two streamed tokens that should not be exceeded (a bucket bound of vllm:inter_token_latency_seconds:
    ..., 0.075, 0.1, 0.15, 0.2, ...)."""
    objective: float = 0.99
    """Share of inter-token gaps, over 30 days, within `seconds`."""


class SloConfig(StrictModel):
    enabled: bool = True
    """Record the SLIs and alert on error-budget burn (1h/5m and 6h/30m pages, 3d/6h ticket); needs
    monitoring.enabled."""
    timeToFirstToken: TimeToFirstTokenObjective = Field(
        default_factory=TimeToFirstTokenObjective, alias="timeToFirstToken"
    )
    """How long a chat user waits for the answer to start."""
    interTokenLatency: InterTokenLatencyObjective = Field(
        default_factory=InterTokenLatencyObjective, alias="interTokenLatency"
    )
    """How smoothly the answer streams once it started."""


# Requests per second one model's load may name: far above any single model's traffic (a replica
# serves at most a few hundred), low enough that the replica count stays within MAX_REPLICAS-scale
# arithmetic.
MAX_REQUESTS_PER_SECOND = 100_000


class TokenLengths(StrictModel):
    """Tokens per request: the mean, and optionally the 95th percentile."""

    mean: int = Field(ge=1, le=MAX_TOKENS)
    """Mean tokens per request; the capacity table is computed at it."""
    p95: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """95th percentile of tokens per request; the plan warns when the p95 prompt plus the p95 output exceed
    maxModelLen (vLLM refuses those requests)."""

    @model_validator(mode="after")
    def _ordered(self) -> TokenLengths:
        if self.p95 is not None and self.p95 < self.mean:
            raise ValueError(f"p95 ({self.p95}) is below mean ({self.mean}); a 95th percentile is at least the mean")
        return self


class LoadConfig(StrictModel):
    """The traffic a model is expected to carry; with `slo` it gives the replicas needed (docs/capacity.md)."""

    peakRequestsPerSecond: float = Field(gt=0, le=MAX_REQUESTS_PER_SECOND, alias="peakRequestsPerSecond")
    """Requests per second at the busiest hour."""
    troughRequestsPerSecond: float = Field(0, ge=0, le=MAX_REQUESTS_PER_SECOND, alias="troughRequestsPerSecond")
    """Requests per second at the quietest hour (0: none)."""
    promptTokens: TokenLengths = Field(alias="promptTokens")
    """Prompt tokens per request."""
    outputTokens: TokenLengths = Field(alias="outputTokens")
    """Output tokens per request."""
    peakHoursPerDay: float = Field(24, gt=0, le=24, alias="peakHoursPerDay")
    """Hours a day the traffic stays at the peak rate; the rest run at the trough rate. Only the GPU-hours per day
    and the cost per day and per million output tokens read it. Default 24: every hour at peak, the upper bound."""

    @model_validator(mode="after")
    def _trough_below_peak(self) -> LoadConfig:
        if self.troughRequestsPerSecond > self.peakRequestsPerSecond:
            raise ValueError(
                f"troughRequestsPerSecond ({self.troughRequestsPerSecond:g}) exceeds peakRequestsPerSecond "
                f"({self.peakRequestsPerSecond:g}); the trough is the quietest hour"
            )
        return self


# The verification Job's load sweep is short: a few levels of a few requests, so it adds minutes, not
# hours, to `pulumi up` (its time budget is in components/verification/job.py).
MAX_SWEEP_LEVELS = 8
MAX_SWEEP_CONCURRENCY = 256
MAX_SWEEP_REQUESTS = 256
SweepLevel = Annotated[int, Field(ge=1, le=MAX_SWEEP_CONCURRENCY)]


class SweepConfig(StrictModel):
    """A short load sweep the verification Job runs after the smoke checks, against the plan's prediction."""

    enabled: bool = False
    """Run the sweep (off by default): the Job reports predicted against measured TTFT, TPOT and output tokens per
    second per concurrency level, and the highest concurrency meeting `slo` (docs/verification.md)."""
    concurrency: list[SweepLevel] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1, max_length=MAX_SWEEP_LEVELS
    )
    """Concurrency levels, in increasing order, each at most 256."""
    requestsPerLevel: int = Field(8, ge=1, le=MAX_SWEEP_REQUESTS, alias="requestsPerLevel")
    """Streamed requests per level (at least the level's concurrency gives every client one)."""
    promptTokens: int | None = Field(None, ge=1, le=MAX_TOKENS, alias="promptTokens")
    """Prompt tokens per request (default: `load.promptTokens.mean`, else 512)."""
    outputTokens: int | None = Field(None, ge=1, le=MAX_TOKENS, alias="outputTokens")
    """Output tokens per request (default: `load.outputTokens.mean`, else 128)."""

    @field_validator("concurrency")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(b <= a for a, b in itertools.pairwise(v)):
            raise ValueError(f"levels must increase, each once, e.g. [1, 2, 4, 8]; got {v}")
        return v


class VerificationConfig(StrictModel):
    golden: Literal["report", "exact", "off"] = "report"
    """Golden greedy prompts in the verification Job (docs/verification.md): report compares the answers with
    golden/<name>.json (committed from the first rollout's log) and reports a changed revision, engine, quantization or
    KV-cache dtype and each differing answer; exact also fails the Job when any answer differs; off skips them."""
    sweep: SweepConfig = Field(default_factory=SweepConfig)
    """A short load sweep after the checks, predicted against measured (off by default; docs/verification.md)."""


# Other names one model or adapter answers to through the entrance: each becomes a rewrite rule the
# endpoint picker evaluates per request, so a handful, not a catalogue.
MAX_ALIASES = 16
# What the program deploys when a model sets neither (the sizing CLI takes the same defaults, so its
# numbers are the plan's). vLLM's own default utilization is 0.92 from v0.20 (planner/vllm_releases.py);
# the program passes --gpu-memory-utilization explicitly, so that default never applies to its servers.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
DEFAULT_TARGET_CONCURRENT_REQUESTS = 4


class AdapterConfig(StrictModel):
    """A LoRA adapter served on its base model's servers, addressed by clients under `name`."""

    name: str
    """The model name clients send (`"model": "<name>"`) to use this adapter; a DNS label, unique among every model and
    adapter of the stack."""
    repo: RepoId
    """Hugging Face Hub repo id of the PEFT LoRA adapter, `org/name`; its adapter_config.json must be in model-metadata/
    or the Hugging Face cache (docs/routing.md)."""
    revision: str
    """The 40-character commit SHA of the adapter to serve; mirrored and SHA-256-verified like the base weights."""
    aliases: list[str] = Field(default_factory=list, max_length=MAX_ALIASES)
    """Other names clients may send for this adapter through the entrance; the endpoint picker rewrites them to `name`
    (InferenceModelRewrite). Needs exposure.entrance."""

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, v: list[str]) -> list[str]:
        return [model_alias(a) for a in v]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return dns_label(v)

    @field_validator("revision")
    @classmethod
    def _revision(cls, v: str) -> str:
        return pinned_commit(v)


TensorParallel = Literal["auto"] | Annotated[int, Field(ge=1, le=64)]


class SignatureConfig(StrictModel):
    """The publisher's OpenSSF model signature (the `model-signing` package) the mirror Job verifies."""

    multiline_fields = frozenset({"publicKey", "certificateChain"})

    method: Literal["sigstore", "key", "certificate"] = "sigstore"
    """sigstore: keyless, the signer's identity as Sigstore's certificate and log attest it; key: a public key;
    certificate: a signing certificate chained to `certificateChain`."""
    file: RepoPath = "model.sig"
    """Path of the signature file in the repo (model-signing's default name is model.sig); the mirror fetches it with
    the weights."""
    identity: PrintableName | None = None
    """method sigstore: the signer identity the certificate must name (an e-mail, or a workflow URI for CI signing)."""
    issuer: HttpUrl | None = None
    """method sigstore: the OIDC issuer that vouched for the identity, e.g. https://accounts.google.com or https://token.actions.githubusercontent.com."""
    publicKey: PemPublic | None = Field(None, alias="publicKey")
    """method key: the publisher's public key, PEM (a YAML block)."""
    certificateChain: PemPublic | None = Field(None, alias="certificateChain")
    """method certificate: the chain of trust (PEM certificates) the signing certificate must chain to."""

    @model_validator(mode="after")
    def _method_keys(self) -> SignatureConfig:
        needs = {"sigstore": ("identity", "issuer"), "key": ("publicKey",), "certificate": ("certificateChain",)}
        missing = [k for k in needs[self.method] if getattr(self, k) is None]
        if missing:
            raise ValueError(
                f"method {self.method} needs {' and '.join(missing)}: the signature is checked against "
                "them, and without them any signer would pass"
            )
        stray = [k for m, keys in needs.items() if m != self.method for k in keys if k in self.model_fields_set]
        if stray:
            raise ValueError(
                f"{', '.join(stray)} apply to another method than {self.method}; remove them or change method"
            )
        return self

    def describe(self) -> str:
        """What the mirror checks, for the plan and the manifest."""
        if self.method == "sigstore":
            return f"sigstore signature {self.file} by {self.identity} (issuer {self.issuer})"
        trusted = "public key" if self.method == "key" else "certificate chain"
        return f"{self.method} signature {self.file} against the configured {trusted}"


class ModelConfig(StrictModel):
    multiline_fields = frozenset({"chatTemplate"})

    repo: RepoId
    """Hugging Face Hub repo id, `org/name`."""
    revision: str
    """The 40-character commit SHA to serve. Branches and tags move; a commit proves which bytes are served."""
    name: str | None = None
    """Served model name and Kubernetes name (DNS label). Default: the repo name, lower-cased."""
    gated: bool = False
    """The repo needs an accepted licence and an HF token (set `hfToken` as secret config)."""
    engine: Literal["vllm", "kserve"] = "vllm"
    """vllm: a Deployment/LeaderWorkerSet running `vllm serve`; kserve: a KServe InferenceService."""
    pool: PrintableName
    """Name of the GPU pool (in `pools`) the servers run on."""
    tensorParallelSize: TensorParallel = Field("auto", alias="tensorParallelSize")
    """GPUs one replica shards the model across inside a node, or `auto` for the smallest size that fits."""
    targetConcurrentRequests: int = Field(
        DEFAULT_TARGET_CONCURRENT_REQUESTS, ge=1, le=4096, alias="targetConcurrentRequests"
    )
    """Full-length (maxModelLen) requests one replica's KV cache should hold at once: tensorParallelSize auto picks the
    smallest size that reaches it; the plan warns when the chosen size falls short."""
    pipelineParallelSize: int = Field(1, ge=1, le=64, alias="pipelineParallelSize")
    """Pipeline stages; more than one spreads a replica across nodes (needs RDMA to be fast)."""
    maxModelLen: int | None = Field(None, ge=16, le=MAX_TOKENS, alias="maxModelLen")
    """Longest prompt + output in tokens. Default: the model's own maximum (max_position_embeddings)."""
    gpuMemoryUtilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, gt=0.05, le=0.99, alias="gpuMemoryUtilization")
    """Share of each GPU's memory vLLM may take (weights + activations + KV cache)."""
    kvCacheDtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field("auto", alias="kvCacheDtype")
    """KV-cache element type; fp8 halves KV memory (needs compute capability 8.9+ to be fast)."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """Activation/weight dtype; auto takes the checkpoint's."""
    quantization: str | None = None
    """Weight quantization method passed to vLLM (fp8, awq, gptq, ...); default: what the checkpoint declares."""
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS)
    """Serving replicas (each is TP x PP GPUs). Unset with a predicted `load` and no autoscaling: the replicas at
    peak."""
    image: str = VLLM_IMAGE
    """Engine image, pinned by tag (not latest) or digest."""
    maxNumSeqs: int | None = Field(None, ge=1, le=65_536, alias="maxNumSeqs")
    """vLLM --max-num-seqs; default: vLLM's."""
    maxNumBatchedTokens: int | None = Field(None, ge=16, le=MAX_TOKENS, alias="maxNumBatchedTokens")
    """vLLM --max-num-batched-tokens; changes peak activation memory and so KV capacity."""
    enablePrefixCaching: bool = Field(True, alias="enablePrefixCaching")
    """Reuse KV cache across requests that share a prefix (system prompts, chat history)."""
    chatTemplate: str | None = Field(None, max_length=65_536, alias="chatTemplate")
    """A Jinja chat template for models that ship none; ignored (with a warning) when the model has one."""
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig)
    """Autoscaling on queue depth and KV-cache usage."""
    slo: SloConfig = Field(default_factory=SloConfig)
    """Latency objectives for this model and the burn-rate alerts on them (both engines run the pinned vLLM)."""
    load: LoadConfig | None = None
    """Expected traffic (requests per second at peak and trough, prompt and output tokens): the plan derives the
    replicas that meet `slo` at both from the performance model (docs/capacity.md) and deploys them where replicas,
    autoscaling.minReplicas/maxReplicas/queueThreshold and the pool's node counts are unset; it warns when a set
    value cannot reach the peak, and shows GPU-hours and cost per day in plan.md."""
    updateStrategy: Literal["auto", "RollingUpdate", "Recreate"] = Field("auto", alias="updateStrategy")
    """auto: RollingUpdate (never below the serving replicas) when the pool can hold one more replica, else Recreate."""
    canaryTrafficPercent: int | None = Field(None, ge=0, le=100, alias="canaryTrafficPercent")
    """KServe only: share of traffic `revision` takes as a canary; needs `canaryBaselineRevision` (the commit serving
    the rest)."""
    canaryBaselineRevision: str | None = Field(None, alias="canaryBaselineRevision")
    """KServe only: the 40-character commit now serving. With canaryTrafficPercent it stays the stable predictor while
    `revision` runs as the canary; promote by setting it to `revision` or removing canaryTrafficPercent."""
    aliases: list[str] = Field(default_factory=list, max_length=MAX_ALIASES)
    """Other names clients may send for this model through the entrance, e.g. its Hub repo id; the endpoint picker
    rewrites them to the served name and the answer back (InferenceModelRewrite). Needs exposure.entrance."""
    adapters: list[AdapterConfig] = Field(default_factory=list, max_length=MAX_ENTRIES)
    """LoRA adapters this model's servers load at start (vLLM --enable-lora --lora-modules); --max-loras,
    --max-lora-rank and --max-cpu-loras are derived from their adapter_config.json, and sizing counts their GPU
    memory."""
    verification: VerificationConfig = Field(default_factory=VerificationConfig)
    """What the verification Job checks beyond the smoke checks (vLLM models)."""
    signature: SignatureConfig | None = None
    """Verify the publisher's OpenSSF model signature after the mirror downloads the weights; a mismatch fails the
    mirror Job and no server starts. Unset: the plan reports the model as unsigned, not verified."""
    verifyAtStart: Literal["sizes", "sha256"] = Field("sizes", alias="verifyAtStart")
    """Before a vLLM server loads from the model volume, check the files against the mirror's manifest: sizes (every
    file present, none extra, sizes equal; seconds) or sha256 (every byte; adds the weights' size / 250 MB/s to the load
    estimate and the startup budget)."""
    kserveStorage: Literal["bucket", "hf"] = Field("bucket", alias="kserveStorage")
    """KServe only: where the storage initializer fetches weights. bucket: the mirrored s3:// or gs:// folder of the
    pinned commit (pvc:// of the model volume without a bucket); hf: hf://<repo>:<revision> from the Hub, the token
    handed over through a ClusterStorageContainer."""

    @field_validator("revision", "canaryBaselineRevision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        return None if v is None else pinned_commit(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else dns_label(v)

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, v: list[str]) -> list[str]:
        return [model_alias(a) for a in v]

    @field_validator("quantization")
    @classmethod
    def _quantization(cls, v: str | None) -> str | None:
        if v is not None and v not in QUANTIZATION_METHODS:
            hint = did_you_mean(v, QUANTIZATION_METHODS)
            raise ValueError(
                f"{excerpt(v)} is not a vLLM quantization method{hint}; known: {', '.join(QUANTIZATION_METHODS)}"
            )
        return v

    @field_validator("tensorParallelSize", mode="before")
    @classmethod
    def _tp(cls, v: Any) -> Any:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64):
            return v
        raise ValueError(f"{excerpt(v)} is not allowed; use `auto` or a whole number of GPUs from 1 to 64")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        return validate_image(v)

    @property
    def served_name(self) -> str:
        return self.name or default_model_name(self.repo)

    @model_validator(mode="after")
    def _replicas(self) -> ModelConfig:
        a = self.autoscaling
        if a.enabled and a.minReplicas > a.maxReplicas:
            raise ValueError(f"autoscaling.minReplicas ({a.minReplicas}) exceeds maxReplicas ({a.maxReplicas})")
        if a.enabled and "replicas" in self.model_fields_set:
            raise ValueError(
                "replicas is decided by the autoscaler when autoscaling is enabled; "
                "set autoscaling.minReplicas and maxReplicas instead"
            )
        kserve_only = {
            "canaryTrafficPercent": self.canaryTrafficPercent,
            "canaryBaselineRevision": self.canaryBaselineRevision,
            "kserveStorage": None if self.kserveStorage == "bucket" else self.kserveStorage,
        }
        for key, value in kserve_only.items():
            if value is not None and self.engine != "kserve":
                raise ValueError(f"{key} applies to engine: kserve only")
        if self.canaryTrafficPercent is not None and self.canaryBaselineRevision is None:
            raise ValueError(
                "canaryTrafficPercent needs canaryBaselineRevision, the commit that keeps serving the rest"
            )
        if self.engine == "kserve" and self.adapters:
            raise ValueError("adapters apply to engine: vllm only (this program passes LoRA flags to `vllm serve`)")
        return self
