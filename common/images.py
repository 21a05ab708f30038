"""Every container image the program deploys, in one place: repository, tag, and digest.

A tag can be pushed again (the same name then means other bytes); a digest is the sha256 of the
manifest, so `repo:tag@sha256:...` names exactly the bytes that were reviewed. The tag stays in the
reference for the reader; the runtime pulls by the digest. Each digest is a `Fact` with where it was
read; one that could not be read here is unresolved, carries the command that settles it, and the
image is then deployed by tag alone (the plan lists it, and a stack whose policy config says
`requireDigest` is refused until it is settled).

Settle or refresh every digest on a machine that can reach the registries:

    python -m tools.resolve_image_digests            # prints the resolved entries
    python -m tools.resolve_image_digests --write    # rewrites the DIGESTS table below

The resolver takes the `Docker-Content-Digest` of the tag's manifest list / OCI index (the
multi-architecture entry a node's runtime resolves its platform from) and checks it against the
sha256 of the body it received.

Add-on charts: where a chart lets its values name an image by digest, the image is in this table and
the add-on's values take it from here (GPU and Network Operator operands in components/operators,
KEDA, LWS, cert-manager, kube-prometheus-stack and the KServe controller in components/addons), each
entry's tag being that chart version's own default. docs/security.md, "Add-on chart images", says
per chart which image keys exist and why a digest cannot (or was not) set through the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.facts import Fact

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
RESOLVE_COMMAND = "python -m tools.resolve_image_digests --write"

# Registries whose references may leave the host out (the Docker Hub default), and how Docker Hub
# spells a one-component official image (`alpine` is `library/alpine`), as the distribution
# reference grammar normalises them (distribution/reference normalize.go: defaultDomain,
# officialRepoPrefix).
DOCKER_HUB = "docker.io"
DOCKER_HUB_API_HOST = "registry-1.docker.io"


@dataclass(frozen=True)
class Image:
    key: str
    """The program's name for this image (the key of IMAGES)."""
    repository: str
    """As written in a pod spec: `vllm/vllm-openai`, `ghcr.io/llm-d/llm-d-router-endpoint-picker`."""
    tag: str
    """The published tag the digest was taken from."""
    digest: Fact
    """sha256 of the tag's manifest list / OCI index; `value` None when unresolved."""
    used_by: str
    """Which workload runs it, for the plan and the docs."""

    @property
    def tagged(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def reference(self) -> str:
        """`repo:tag@sha256:...` when the digest is known, else `repo:tag`."""
        return f"{self.tagged}@{self.digest.value}" if self.digest.value else self.tagged

    @property
    def resolved(self) -> bool:
        return self.digest.value is not None


def split_reference(ref: str) -> tuple[str, str, str]:
    """(registry host, path in that registry, the rest: `:tag`, `@digest` or both) of a reference.

    The first component is a host when it has a '.' or ':' or is `localhost` (distribution/reference
    splitDockerDomain); otherwise the image lives on Docker Hub, where a one-component name is an
    official image under `library/`.
    """
    name, at, digest = ref.partition("@")
    head, slash, last = name.rpartition("/")
    repo_last, colon, tag = last.partition(":")
    path = f"{head}{slash}{repo_last}"
    rest = (f":{tag}" if colon else "") + (f"@{digest}" if at else "")
    first, sep, remainder = path.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        host, path = first, remainder
    else:
        host = DOCKER_HUB
    if host in (DOCKER_HUB, "index.docker.io", DOCKER_HUB_API_HOST):
        host = DOCKER_HUB
        if "/" not in path:
            path = f"library/{path}"
    return host, path, rest


def mirrored(ref: str, mirrors: dict[str, str]) -> str:
    """`ref` pulled through a mirror: `mirrors` maps an upstream host (docker.io, ghcr.io) to the
    prefix that serves it (`<account>.dkr.ecr.<region>.amazonaws.com/docker-hub`). A reference whose
    registry has no mirror is returned unchanged; tag and digest are kept, so a digest still pins the
    same bytes through the cache."""
    host, path, rest = split_reference(ref)
    prefix = mirrors.get(host)
    return f"{prefix}/{path}{rest}" if prefix else ref


def _unresolved(repository: str, tag: str, why: str) -> Fact:
    return Fact(
        subject=f"digest of {repository}:{tag}",
        value=None,
        source=why,
        established=False,
        resolve_with=f"{RESOLVE_COMMAND}  (or: crane digest {repository}:{tag})",
    )


def _checked(repository: str, tag: str, digest: str) -> str:
    if not DIGEST_RE.match(digest):
        raise ValueError(f"{repository}:{tag}: {digest!r} is not sha256:<64 hex>")
    return digest


def _cited(repository: str, tag: str, digest: str, source: str) -> Fact:
    # Read in a published list, not from the registry: used (a digest can only name bytes the
    # repository's owner pushed, and a wrong one fails the pull with "manifest unknown" rather than
    # running something else), but listed as unverified until the resolver confirms it.
    return Fact(
        subject=f"digest of {repository}:{tag}",
        value=_checked(repository, tag, digest),
        source=source,
        established=False,
        resolve_with=f"{RESOLVE_COMMAND}  (or: crane digest {repository}:{tag})",
    )


def _resolved(repository: str, tag: str, digest: str, source: str) -> Fact:
    # Read from the registry by tools/resolve_image_digests.py, checked against the body's sha256.
    return Fact(subject=f"digest of {repository}:{tag}", value=_checked(repository, tag, digest), source=source)


_NOT_FOUND = (
    "no digest for this tag is published in a citable source (the project's release notes and repositories, "
    "checked 2026-12-01), and the registry was not reachable from the machine that wrote this table"
)

# The table the resolver rewrites: key -> (repository, tag, digest Fact). Bump a tag here and run
# the resolver; never write a digest by hand that was not read from the registry or a cited list.
# BEGIN DIGESTS (tools/resolve_image_digests.py rewrites this block)
DIGESTS: dict[str, tuple[str, str, Fact]] = {
    "vllm": ("vllm/vllm-openai", "v0.32.0", _unresolved("vllm/vllm-openai", "v0.32.0", _NOT_FOUND)),
    "downloader": ("vllm/vllm-openai", "v0.32.0", _unresolved("vllm/vllm-openai", "v0.32.0", _NOT_FOUND)),
    "aws-cli": ("amazon/aws-cli", "2.37.7", _unresolved("amazon/aws-cli", "2.37.7", _NOT_FOUND)),
    "gcloud": ("google/cloud-sdk", "587.0.0-slim", _unresolved("google/cloud-sdk", "587.0.0-slim", _NOT_FOUND)),
    "storage-initializer": (
        "kserve/storage-initializer",
        "v0.20.0",
        _unresolved("kserve/storage-initializer", "v0.20.0", _NOT_FOUND),
    ),
    "verify-python": ("python", "3.12.8-slim", _unresolved("python", "3.12.8-slim", _NOT_FOUND)),
    "model-signing": (
        "ghcr.io/sigstore/model-transparency-cli",
        "v1.0.1",
        _unresolved("ghcr.io/sigstore/model-transparency-cli", "v1.0.1", _NOT_FOUND),
    ),
    "endpoint-picker": (
        "ghcr.io/llm-d/llm-d-router-endpoint-picker",
        "v0.10.0",
        _unresolved("ghcr.io/llm-d/llm-d-router-endpoint-picker", "v0.10.0", _NOT_FOUND),
    ),
    "body-based-router": (
        "registry.k8s.io/gateway-api-inference-extension/bbr",
        "v1.5.0",
        _unresolved("registry.k8s.io/gateway-api-inference-extension/bbr", "v1.5.0", _NOT_FOUND),
    ),
    "gpu-operator-toolkit": (
        "nvcr.io/nvidia/k8s/container-toolkit",
        "v1.20.0",
        _unresolved("nvcr.io/nvidia/k8s/container-toolkit", "v1.20.0", _NOT_FOUND),
    ),
    "gpu-operator-device-plugin": (
        "nvcr.io/nvidia/k8s-device-plugin",
        "v0.20.0",
        _unresolved("nvcr.io/nvidia/k8s-device-plugin", "v0.20.0", _NOT_FOUND),
    ),
    "gpu-operator-dcgm-exporter": (
        "nvcr.io/nvidia/k8s/dcgm-exporter",
        "4.6.0-4.8.3-distroless",
        _unresolved("nvcr.io/nvidia/k8s/dcgm-exporter", "4.6.0-4.8.3-distroless", _NOT_FOUND),
    ),
    "gpu-operator-mig-manager": (
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager",
        "v0.15.0",
        _unresolved("nvcr.io/nvidia/cloud-native/k8s-mig-manager", "v0.15.0", _NOT_FOUND),
    ),
    "keda-operator": ("ghcr.io/kedacore/keda", "2.20.2", _unresolved("ghcr.io/kedacore/keda", "2.20.2", _NOT_FOUND)),
    "keda-metrics-apiserver": (
        "ghcr.io/kedacore/keda-metrics-apiserver",
        "2.20.2",
        _unresolved("ghcr.io/kedacore/keda-metrics-apiserver", "2.20.2", _NOT_FOUND),
    ),
    "keda-admission-webhooks": (
        "ghcr.io/kedacore/keda-admission-webhooks",
        "2.20.2",
        _unresolved("ghcr.io/kedacore/keda-admission-webhooks", "2.20.2", _NOT_FOUND),
    ),
    "lws-controller": (
        "registry.k8s.io/lws/lws",
        "v0.10.0",
        _unresolved("registry.k8s.io/lws/lws", "v0.10.0", _NOT_FOUND),
    ),
    "cert-manager-controller": (
        "quay.io/jetstack/cert-manager-controller",
        "v1.21.1",
        _unresolved("quay.io/jetstack/cert-manager-controller", "v1.21.1", _NOT_FOUND),
    ),
    "cert-manager-webhook": (
        "quay.io/jetstack/cert-manager-webhook",
        "v1.21.1",
        _unresolved("quay.io/jetstack/cert-manager-webhook", "v1.21.1", _NOT_FOUND),
    ),
    "cert-manager-cainjector": (
        "quay.io/jetstack/cert-manager-cainjector",
        "v1.21.1",
        _unresolved("quay.io/jetstack/cert-manager-cainjector", "v1.21.1", _NOT_FOUND),
    ),
    "cert-manager-acmesolver": (
        "quay.io/jetstack/cert-manager-acmesolver",
        "v1.21.1",
        _unresolved("quay.io/jetstack/cert-manager-acmesolver", "v1.21.1", _NOT_FOUND),
    ),
    "cert-manager-startupapicheck": (
        "quay.io/jetstack/cert-manager-startupapicheck",
        "v1.21.1",
        _unresolved("quay.io/jetstack/cert-manager-startupapicheck", "v1.21.1", _NOT_FOUND),
    ),
    "prometheus-operator": (
        "quay.io/prometheus-operator/prometheus-operator",
        "v0.93.0",
        _unresolved("quay.io/prometheus-operator/prometheus-operator", "v0.93.0", _NOT_FOUND),
    ),
    "prometheus-config-reloader": (
        "quay.io/prometheus-operator/prometheus-config-reloader",
        "v0.93.0",
        _unresolved("quay.io/prometheus-operator/prometheus-config-reloader", "v0.93.0", _NOT_FOUND),
    ),
    "prometheus": (
        "quay.io/prometheus/prometheus",
        "v3.13.2-distroless",
        _unresolved("quay.io/prometheus/prometheus", "v3.13.2-distroless", _NOT_FOUND),
    ),
    "alertmanager": (
        "quay.io/prometheus/alertmanager",
        "v0.33.1",
        _unresolved("quay.io/prometheus/alertmanager", "v0.33.1", _NOT_FOUND),
    ),
    "kube-webhook-certgen": (
        "ghcr.io/jkroepke/kube-webhook-certgen",
        "1.8.5",
        _unresolved("ghcr.io/jkroepke/kube-webhook-certgen", "1.8.5", _NOT_FOUND),
    ),
    "kserve-controller": (
        "kserve/kserve-controller",
        "v0.20.0",
        _unresolved("kserve/kserve-controller", "v0.20.0", _NOT_FOUND),
    ),
    "network-operator-k8s-rdma-shared-dev-plugin": (
        "nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin",
        "network-operator-v26.4.1",
        _unresolved("nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin", "network-operator-v26.4.1", _NOT_FOUND),
    ),
    "network-operator-multus-cni": (
        "nvcr.io/nvidia/mellanox/multus-cni",
        "network-operator-v26.4.1",
        _unresolved("nvcr.io/nvidia/mellanox/multus-cni", "network-operator-v26.4.1", _NOT_FOUND),
    ),
    "network-operator-plugins": (
        "nvcr.io/nvidia/mellanox/plugins",
        "network-operator-v26.4.1",
        _unresolved("nvcr.io/nvidia/mellanox/plugins", "network-operator-v26.4.1", _NOT_FOUND),
    ),
    "network-operator-nvidia-k8s-ipam": (
        "nvcr.io/nvidia/mellanox/nvidia-k8s-ipam",
        "network-operator-v26.4.1",
        _unresolved("nvcr.io/nvidia/mellanox/nvidia-k8s-ipam", "network-operator-v26.4.1", _NOT_FOUND),
    ),
    "grafana": ("docker.io/grafana/grafana", "13.1.3", _unresolved("docker.io/grafana/grafana", "13.1.3", _NOT_FOUND)),
    "grafana-sidecar": (
        "quay.io/kiwigrid/k8s-sidecar",
        "2.10.1",
        _unresolved("quay.io/kiwigrid/k8s-sidecar", "2.10.1", _NOT_FOUND),
    ),
    "kube-state-metrics": (
        "registry.k8s.io/kube-state-metrics/kube-state-metrics",
        "v2.19.1",
        _unresolved("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.19.1", _NOT_FOUND),
    ),
    "node-exporter": (
        "quay.io/prometheus/node-exporter",
        "v1.12.1-distroless",
        _unresolved("quay.io/prometheus/node-exporter", "v1.12.1-distroless", _NOT_FOUND),
    ),
    "gpu-operator": (
        "nvcr.io/nvidia/gpu-operator",
        "v26.7.0",
        _unresolved("nvcr.io/nvidia/gpu-operator", "v26.7.0", _NOT_FOUND),
    ),
    "node-feature-discovery": (
        "registry.k8s.io/nfd/node-feature-discovery",
        "v0.19.0",
        _unresolved("registry.k8s.io/nfd/node-feature-discovery", "v0.19.0", _NOT_FOUND),
    ),
    "agentgateway-controller": (
        "cr.agentgateway.dev/controller",
        "v1.4.1",
        _unresolved("cr.agentgateway.dev/controller", "v1.4.1", _NOT_FOUND),
    ),
    "network-operator": (
        "nvcr.io/nvidia/cloud-native/network-operator",
        "v26.4.1",
        _unresolved("nvcr.io/nvidia/cloud-native/network-operator", "v26.4.1", _NOT_FOUND),
    ),
    "kube-rbac-proxy": (
        "quay.io/brancz/kube-rbac-proxy",
        "v0.18.0",
        _unresolved("quay.io/brancz/kube-rbac-proxy", "v0.18.0", _NOT_FOUND),
    ),
    "karpenter-controller": (
        "public.ecr.aws/karpenter/controller",
        "1.14.1",
        _cited(
            "public.ecr.aws/karpenter/controller",
            "1.14.1",
            "sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
            "the published karpenter chart 1.14.1's values.yaml, controller.image.digest "
            "(charts/karpenter-1.14.1/values.yaml:131)",
        ),
    ),
    "efa-device-plugin": (
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin",
        "v0.5.20",
        _unresolved(
            "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin", "v0.5.20", _NOT_FOUND
        ),
    ),
}
# END DIGESTS

_USED_BY = {
    "vllm": "vLLM servers and KServe models' own ServingRuntime (models[].image default)",
    "downloader": "mirror Jobs, the Hub download (modelStore.downloaderImage default)",
    "aws-cli": "mirror Jobs, the bucket sync on AWS",
    "gcloud": "mirror Jobs, the bucket sync on GCP",
    "storage-initializer": "KServe storage initializer (ClusterStorageContainer)",
    "endpoint-picker": "llm-d endpoint picker (router.epp.image)",
    "body-based-router": "the entrance's Body-Based Router on GKE, several base models (bbr.image)",
    "model-signing": "mirror Jobs, the publisher's signature check (models[].signature)",
    "verify-python": "the verification Job (endpoint tools from a ConfigMap)",
    # GPU Operator operands (chart gpu-operator v26.7.0, components/operators/values.py); each tag is
    # the chart's default at that version (deployments/gpu-operator/values.yaml, copied in
    # tests/fixtures/helm/gpu-operator-values.yaml: toolkit line 233, devicePlugin 245, dcgmExporter
    # 304, gfd 363, migManager 374).
    "gpu-operator-toolkit": "GPU Operator: NVIDIA Container Toolkit DaemonSet (toolkit.*)",
    "gpu-operator-device-plugin": "GPU Operator: device plugin and GPU feature discovery (devicePlugin.*, gfd.*)",
    "gpu-operator-dcgm-exporter": "GPU Operator: DCGM exporter (dcgmExporter.*)",
    "gpu-operator-mig-manager": "GPU Operator: MIG manager, where the operator partitions GPUs (migManager.*)",
    # KEDA chart 2.20.2: the three tags default to the chart's appVersion 2.20.2 (keda/values.yaml
    # image.*.tag "", keda/Chart.yaml appVersion; components/addons/keda.py).
    "keda-operator": "KEDA operator (image.keda.*)",
    "keda-metrics-apiserver": "KEDA metrics API server (image.metricsApiServer.*)",
    "keda-admission-webhooks": "KEDA admission webhooks (image.webhooks.*)",
    # LWS chart 0.10.0: the published chart names registry.k8s.io/lws/lws:v0.10.0 (hack/push-chart.sh
    # rewrites the values' `main` tag when it packages; components/addons/leader_worker_set.py).
    "lws-controller": "LeaderWorkerSet controller (image.manager.*)",
    # cert-manager chart v1.21.1: every tag defaults to the chart's appVersion, the release tag
    # (deploy/charts/cert-manager/Chart.yaml "set automatically by the release tool").
    "cert-manager-controller": "cert-manager controller (image.*)",
    "cert-manager-webhook": "cert-manager webhook (webhook.image.*)",
    "cert-manager-cainjector": "cert-manager CA injector (cainjector.image.*)",
    "cert-manager-acmesolver": "cert-manager ACME HTTP-01 solver pods (acmesolver.image.*)",
    "cert-manager-startupapicheck": "cert-manager post-install API check Job (startupapicheck.image.*)",
    # kube-prometheus-stack chart 88.3.0 (charts/kube-prometheus-stack/values.yaml at the tag: operator
    # and config reloader tag "" -> appVersion v0.93.0 in Chart.yaml; prometheus line 4347, alertmanager
    # 1021, certgen 3132; components/addons/prometheus_operator.py).
    "prometheus-operator": "Prometheus Operator (prometheusOperator.image.*)",
    "prometheus-config-reloader": "Prometheus and Alertmanager config reloader sidecars "
    "(prometheusOperator.prometheusConfigReloader.image.*)",
    "prometheus": "Prometheus (prometheus.prometheusSpec.image.*)",
    "alertmanager": "Alertmanager (alertmanager.alertmanagerSpec.image.*)",
    "kube-webhook-certgen": "Prometheus Operator's webhook certificate Jobs "
    "(prometheusOperator.admissionWebhooks.patch.image.*)",
    # kserve-resources chart v0.20.0: tag "" defaults to kserve.version v0.20.0 (values.yaml lines 2, 171).
    "kserve-controller": "KServe controller (kserve-resources kserve.controller.image/tag)",
    # The NicClusterPolicy the program writes for the Network Operator 26.4.1 (components/operators/
    # nic_cluster_policy.py): every node-side image of the release is tagged after it.
    "network-operator-k8s-rdma-shared-dev-plugin": "Network Operator: RDMA shared device plugin (NicClusterPolicy)",
    "network-operator-multus-cni": "Network Operator: Multus CNI (NicClusterPolicy secondaryNetwork)",
    "network-operator-plugins": "Network Operator: CNI plugins (NicClusterPolicy secondaryNetwork)",
    "network-operator-nvidia-k8s-ipam": "Network Operator: NVIDIA IPAM (NicClusterPolicy nvIpam)",
    # kube-prometheus-stack 88.3.0's subcharts (charts/kube-prometheus-stack-88.3.0/charts/*/values.yaml,
    # components/addons/prometheus_operator.py SUBCHART_IMAGES): Grafana's tag defaults to its appVersion
    # 13.1.3 (grafana/values.yaml image.tag "", Chart.yaml), the sidecar's is 2.10.1 (sidecar.image.tag),
    # kube-state-metrics' "v" + appVersion 2.19.1, node-exporter's "v" + appVersion 1.12.1 with the
    # "-distroless" suffix the parent turns on (values.yaml prometheus-node-exporter.image.distroless true).
    "grafana": "Grafana (grafana.image.*)",
    "grafana-sidecar": "Grafana's dashboard and datasource sidecars (grafana.sidecar.image.*)",
    "kube-state-metrics": "kube-state-metrics (kube-state-metrics.image.*)",
    "node-exporter": "node-exporter DaemonSet (prometheus-node-exporter.image.*)",
    # gpu-operator v26.7.0: the operator and its validator default to the chart's appVersion v26.7.0
    # (values.yaml operator.version / validator.version commented out; templates/_helpers.tpl
    # gpu-operator.fullimage); Node Feature Discovery to its subchart's appVersion v0.19.0
    # (charts/node-feature-discovery/Chart.yaml, templates/master.yaml image tag default).
    "gpu-operator": "GPU Operator: the operator, its hook Jobs and the validator (operator.*, validator.*)",
    "node-feature-discovery": "GPU Operator: Node Feature Discovery (node-feature-discovery.image.*)",
    # agentgateway v1.4.1: the controller's tag defaults to the chart's appVersion (values.yaml
    # image.tag "", templates/deployment.yaml:59).
    "agentgateway-controller": "agentgateway controller (controller.image.*)",
    # network-operator 26.4.1: the operator and its hook Jobs default to the chart's appVersion v26.4.1
    # (values.yaml operator.tag commented; templates/operator.yaml:55).
    "network-operator": "Network Operator: the operator and its hook Jobs (operator.*)",
    # kserve-resources v0.20.0: the controller pod's kube-rbac-proxy sidecar
    # (values.yaml:110 kserve.controller.rbacProxyImage; files/kserve/deployment-patch.yaml:51).
    "kube-rbac-proxy": "KServe controller's kube-rbac-proxy sidecar (kserve.controller.rbacProxyImage)",
    # The EKS cluster layer's charts (components/cluster/aws): karpenter 1.14.1 names its controller by
    # tag and digest (charts/karpenter-1.14.1/values.yaml:125-131); aws-efa-k8s-device-plugin v0.5.30
    # by tag (charts/aws-efa-k8s-device-plugin-v0.5.30/values.yaml:1-4, image.repository and image.tag).
    "karpenter-controller": "Karpenter controller (controller.image.*)",
    "efa-device-plugin": "EFA device plugin DaemonSet on EFA nodes (image.*)",
}

IMAGES: dict[str, Image] = {
    key: Image(key=key, repository=repo, tag=tag, digest=fact, used_by=_USED_BY[key])
    for key, (repo, tag, fact) in DIGESTS.items()
}


def reference(key: str) -> str:
    """The reference the program deploys for one of its images."""
    return IMAGES[key].reference


def pinned_tag(key: str) -> str:
    """`tag@sha256:...` (or the tag alone while unresolved): what a chart whose template writes
    `<repository>:<tag>` takes in its tag field so the reference it renders is `reference(key)`."""
    image = IMAGES[key]
    return f"{image.tag}@{image.digest.value}" if image.resolved else image.tag


@dataclass(frozen=True)
class ChartImage:
    """One table entry as a chart's image values take it, pulled through the stack's cache when it
    has one for the entry's registry (`mirrored`): what each add-on's values builder writes."""

    key: str
    name: str
    """The repository as pulled, registry included when the table's has one or a cache rewrites it:
    `ghcr.io/kedacore/keda`, `<account>.dkr.ecr.<region>.amazonaws.com/ghcr/kedacore/keda`."""
    registry: str
    """The registry host of `name` (`docker.io` for a Docker Hub name without one)."""
    path: str
    """`name` without its registry host: what a chart's `repository` takes beside a `registry` key."""
    tag: str
    digest: str | None
    """`sha256:...`, None while unresolved."""

    @property
    def pinned_tag(self) -> str:
        """`tag@sha256:...` (or the tag alone), for a chart that writes `<repository>:<tag>`."""
        return f"{self.tag}@{self.digest}" if self.digest else self.tag

    @property
    def reference(self) -> str:
        """What the chart renders from these values: `name:tag[@digest]`."""
        return f"{self.name}:{self.pinned_tag}"


def chart_image(key: str, mirrors: dict[str, str] | None = None) -> ChartImage:
    """Table entry `key` for a chart's image values, through `mirrors` (images.pullThrough)."""
    entry = IMAGES[key]
    name = mirrored(entry.repository, dict(mirrors or {}))
    host, path, _ = split_reference(name)
    _, sep, rest = name.partition("/")
    if sep and host != DOCKER_HUB:
        # The name carries its host: keep the path exactly as written after it.
        path = rest
    elif host == DOCKER_HUB and not name.startswith(f"{DOCKER_HUB}/"):
        path = name  # `kserve/kserve-controller`, as the table writes it
    return ChartImage(key, name, host, path, entry.tag, entry.digest.value)


def unresolved() -> list[Image]:
    return [image for image in IMAGES.values() if not image.resolved]


def unverified() -> list[Image]:
    """Images deployed by a digest that was not read from the registry itself."""
    return [image for image in IMAGES.values() if image.resolved and not image.digest.established]


def entries_for(ref: str) -> list[Image]:
    """The table entries a deployed reference came from (matched on repository and tag; the engine
    and the downloader share one image today, so a reference may match more than one)."""
    name = ref.partition("@")[0]
    return [image for image in IMAGES.values() if name == image.tagged]
