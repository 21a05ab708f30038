"""How the weights are stored, how clients reach the servers, and how they are watched."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from common import images
from common.alerting import RUNBOOK_DOC
from stack_config.base import StrictModel
from stack_config.entrance import EntranceConfig
from stack_config.fields import (
    BucketName,
    Hostname,
    ImageRef,
    LabelKey,
    LabelValue,
    NamespaceName,
    ObjectName,
    PrintableName,
)
from stack_config.formats import dns_label
from stack_config.namespaces import own_namespace

# The mirror Job's image: it needs the `hf` CLI, which the vLLM image ships with the huggingface_hub
# its release pins. Pinned here on its own, not to VLLM_IMAGE: bumping the engine must not change
# the mirror Jobs' pod templates, which would replace every Job and re-download every model.
# Tag and digest live in common/images.py (entry "downloader").
DOWNLOADER_IMAGE = images.reference("downloader")


LoadFrom = Literal["volume", "bucket", "existing-claim"]
# What `pulumi destroy` does with the model bucket (docs/lifecycle.md).
OnDestroy = Literal["retain", "empty"]


class ModelStoreConfig(StrictModel):
    namespace: str = "llm-serving"
    """Namespace of the servers, the mirror Jobs and their service accounts."""
    bucketName: BucketName | None = Field(None, alias="bucketName")
    """Model bucket name. Default: `<project>-<stack>-models-<random suffix>` (globally unique)."""
    prefix: str = Field("models", max_length=512, pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
    """Object prefix for mirrored weights, without leading or trailing slash; the writer identity may write only under
    it."""
    mirrorPool: PrintableName | None = Field(None, alias="mirrorPool")
    """Run the mirror Jobs on this GPU pool (tolerating its taint) instead of untainted CPU nodes; for clusters without
    CPU nodes."""
    loadFrom: LoadFrom = Field("volume", alias="loadFrom")
    """volume: a ReadWriteMany volume the mirror Job fills; bucket: vLLM's Run:ai streamer reads the bucket;
    existing-claim: a PVC you manage."""
    existingClaim: ObjectName | None = Field(None, alias="existingClaim")
    """Name of an existing ReadWriteMany PVC holding `<org>/<name>/<revision>/` folders (loadFrom: existing-claim)."""
    readMBps: float | None = Field(None, ge=10, le=200_000, alias="readMBps")
    """Read speed of the chosen load path in MB/s (10 to 200,000), for load-time estimates and the startup probe's
    budget. Default per path: volume 500, bucket 1500, existing-claim 500."""
    downloaderImage: ImageRef = Field(DOWNLOADER_IMAGE, alias="downloaderImage")
    """Pinned image for the mirror Job; it must carry the `hf` CLI (the vLLM image does, with the huggingface_hub its
    release pins), so nothing is pip-installed at run time."""
    volumeHeadroom: float = Field(1.25, ge=1.0, le=4.0, alias="volumeHeadroom")
    """Volume size = total weight size x headroom: room for the tokenizer, configs, the manifest and download
    bookkeeping. It does not hold a second revision: the claim keeps its creation size (docs/model-store.md), so grow it
    before mirroring another commit on a class that enforces sizes."""
    onDestroy: OnDestroy = Field("retain", alias="onDestroy")
    """What `pulumi destroy` does with the model bucket. retain (default): the bucket and its weights stay, out of the
    stack (docs/lifecycle.md gives the commands that empty and delete it); empty: destroy deletes every object, every
    version and the bucket. Run `pulumi up` after changing it, before `pulumi destroy`: destroy reads the setting from
    the stack's state."""

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return own_namespace(dns_label(v))

    @model_validator(mode="after")
    def _claim(self) -> ModelStoreConfig:
        if self.loadFrom == "existing-claim" and not self.existingClaim:
            raise ValueError("loadFrom is existing-claim but existingClaim is not set; name the PVC")
        return self


class GatewayConfig(StrictModel):
    name: ObjectName
    """Name of the Gateway API Gateway the HTTPRoutes attach to (it must allow routes from the serving namespace)."""
    namespace: NamespaceName
    """Namespace of that Gateway."""
    hostname: Hostname | None = None
    """Hostname the routes match; default: any hostname the Gateway's listener accepts."""


class ExposureConfig(StrictModel):
    entrance: EntranceConfig | None = None
    """One HTTPS base URL for every model and adapter: a Gateway, an HTTPRoute to one InferencePool per base model, and
    the llm-d endpoint picker choosing the server (docs/routing.md). Clients pick a model by the request's `model`
    field."""
    gateway: GatewayConfig | None = None
    """Expose each model as https://<hostname>/<model>/v1 (and /<model>/health) through an HTTPRoute on this Gateway
    (default: ClusterIP Services only); the older, per-model alternative to `entrance`."""
    allowUnauthenticated: bool = Field(False, alias="allowUnauthenticated")
    """Serve the entrance or gateway routes without an API key: anyone who reaches the Gateway may use every model.
    Without it an exposed stack with no `apiKey` secret is refused (docs/security.md#api-access)."""


class MonitoringConfig(StrictModel):
    enabled: bool = True
    """Create ServiceMonitors, PrometheusRules and Grafana dashboards (needs the Prometheus Operator: installed on a
    created cluster, `addons.preinstalled` on an existing one)."""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)
    """Labels your Prometheus' serviceMonitorSelector/ruleSelector match on an existing cluster, e.g. {release:
    kube-prometheus-stack}; the Prometheus installed on a created cluster selects every monitor and rule."""
    dashboardNamespace: NamespaceName | None = Field(None, alias="dashboardNamespace")
    """Namespace the Grafana sidecar watches for dashboard ConfigMaps; default: the serving namespace."""
    kvCacheUsageAlert: float = Field(0.95, gt=0, le=1, alias="kvCacheUsageAlert")
    """Alert when KV-cache usage stays above this fraction (requests start to queue or be preempted)."""
    errorRateAlert: float = Field(0.05, gt=0, lt=1, alias="errorRateAlert")
    """Alert when more than this share of a model's requests fail (HTTP 5xx, or finished by the engine with an error or
    abort) over 5 minutes."""
    runbookUrl: str = Field(RUNBOOK_DOC, alias="runbookUrl")
    """Where alerts link for what to do: this repository's docs/runbook.md, relative, or its published https:// address;
    each alert appends #<its name>."""

    @model_validator(mode="before")
    @classmethod
    def _replaced_keys(cls, data: object) -> object:
        # Removed keys get their replacement named instead of a bare "unknown key".
        if isinstance(data, dict) and "ttftP95Seconds" in data:
            raise ValueError(
                "ttftP95Seconds was replaced by per-model latency SLOs: set "
                "models[].slo.timeToFirstToken {seconds, objective} instead"
            )
        return data

    @field_validator("runbookUrl")
    @classmethod
    def _runbook(cls, v: str) -> str:
        web = re.fullmatch(r"https?://[^\s#]+", v)
        relative = re.fullmatch(r"[^\s#:]+\.md", v) and not v.startswith("/")
        if not (web or relative):
            raise ValueError(
                f"{v!r} is neither an http(s) address nor a relative path to a .md file (without #anchor); "
                f"e.g. https://github.com/<org>/<repo>/blob/main/{RUNBOOK_DOC}"
            )
        return v
