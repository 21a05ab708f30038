"""Decisions shared by every part of the stack, made once.

The program, its tests and the policy pack all import these names; a literal that appears in two
modules drifts, and a drifted taint key or annotation is exactly the kind of bug that only shows up
as a Pending pod on a real cluster.
"""

from __future__ import annotations

# The GPU and Network Operators' daemonsets tolerate this taint key by default, and the EKS/GKE GPU
# node images advertise the resource under the same name, so one key serves both purposes.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_EFFECT = "NoSchedule"
GPU_RESOURCE = "nvidia.com/gpu"

# Label and annotation keys. A DNS-style prefix keeps them apart from other tools' keys.
PREFIX = "llm-serving.io"
LABEL_POOL = f"{PREFIX}/pool"
# The LABEL_POOL value of the untainted CPU nodes of a cluster this program creates.
SYSTEM_POOL = "system"
LABEL_ACCELERATOR = f"{PREFIX}/accelerator"
LABEL_MODEL = f"{PREFIX}/model"
# A 40-hex commit fits the 63-character label value limit, so the revision can be selected on.
LABEL_REVISION = f"{PREFIX}/revision"
LABEL_COMPONENT = f"{PREFIX}/component"
# On a LoRA adapter's mirror Job: the adapter's served name (its revision label is the adapter's).
LABEL_ADAPTER = f"{PREFIX}/adapter"
ANNOTATION_REPO = f"{PREFIX}/hub-repo"
# Seconds the sizing engine expects the engine to need before /health answers. The policy pack's
# startup-probe-budget rule compares the startup probe against this number.
ANNOTATION_LOAD_SECONDS = f"{PREFIX}/load-time-estimate-seconds"
# The engine build a server runs (vLLM version, or the KServe runtime tag), on workloads and pods.
ANNOTATION_ENGINE_VERSION = f"{PREFIX}/engine-version"
# "true" on a server's pods when the stack set exposure.allowUnauthenticated: the reviewed waiver
# the policy pack's authenticated-exposure rule accepts in place of an API key.
ANNOTATION_ALLOW_UNAUTHENTICATED = f"{PREFIX}/allow-unauthenticated"
# Environment variables a server reads its API keys from: vLLM 0.32 reads the first itself
# (vllm/envs.py VLLM_API_KEY); the second, set only during a rotation, is passed with the first as
# `--api-key $(VLLM_API_KEY) $(VLLM_API_KEY_NEXT)` (docs/security.md#api-access).
API_KEY_ENV = "VLLM_API_KEY"
API_KEY_NEXT_ENV = "VLLM_API_KEY_NEXT"

# Karpenter never voluntarily disrupts (consolidates, or replaces on drift) a node that runs a pod
# with this annotation set to "true" (Karpenter v1.14 docs, concepts/disruption.md "Pod-Level
# Controls", aws/karpenter-provider-aws@1d927085:website/content/en/v1.14/concepts/disruption.md:394-410).
# Every server pod carries it, so no node is taken away under a stream it is serving; elsewhere
# than on Karpenter nodes it means nothing.
ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# The well-known label (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels)
# that marks every object this program creates as part of one application.
LABEL_PART_OF = "app.kubernetes.io/part-of"
PART_OF = "llm-serving"
# On a model volume claim: the size this program computed for it. The claim's own request is left
# as created (claims cannot shrink, EFS claims cannot expand), so this records the current plan.
ANNOTATION_PLANNED_STORAGE = f"{PREFIX}/planned-storage"

# Where a server finds its weights inside the container, whichever way they got there.
MODEL_MOUNT_PATH = "/models"

# Key of the HF token in its Kubernetes Secret, and the environment variable huggingface_hub reads
# it from: the same word on purpose, so `secretKeyRef.key` and the env name can never disagree.
HF_TOKEN_KEY = "HF_TOKEN"

# The files of a Hub repo that make up a servable model, as `hf download --include/--exclude`
# globs (huggingface_hub matches them with fnmatchcase; `*` also crosses `/`). The mirror downloads
# exactly these and verifies exactly these; everything is sized for the safetensors total.
MODEL_FILE_INCLUDE = (
    "*.safetensors",  # the weights (vLLM's default loader reads safetensors only)
    "*.json",  # config, generation config, safetensors index, tokenizer.json/_config, special tokens
    "tokenizer*",  # tokenizer files without a usual suffix (e.g. Mistral's tokenizer.model.v3)
    "*.model",  # SentencePiece models (tokenizer.model, spiece.model)
    "*.tiktoken",  # tiktoken BPE ranks
    "*.jinja",  # chat_template.jinja
    "*.txt",  # BPE merges.txt / WordPiece vocab.txt of older tokenizers (kilobytes)
)
# Copies of the same weights in another checkpoint format, which the include list would otherwise
# catch: Meta's original/ folder (consolidated.*.pth plus its own params.json and tokenizer.model)
# and Mistral's consolidated*.safetensors next to the HF shards. Each is as large as the weights.
MODEL_FILE_EXCLUDE = ("original/*", "consolidated*")

# Port vLLM's OpenAI-compatible server listens on (also its /metrics).
SERVER_PORT = 8000

# The Prometheus this program installs on a cluster it creates (components/addons/
# prometheus_operator.py): release `kube-prometheus-stack` in namespace `monitoring`. The chart
# names the Prometheus Service `<fullname>-prometheus`, and the fullname is the release name when
# that already contains the chart name (templates/_helpers.tpl "kube-prometheus-stack.fullname",
# templates/prometheus/service.yaml at tag kube-prometheus-stack-88.3.0), on port 9090
# (values.yaml prometheus.service.port). KEDA's queue query defaults to this URL, so the default
# and the installed Prometheus cannot drift apart.
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
PROMETHEUS_PORT = 9090
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc:{PROMETHEUS_PORT}"

# pulumi-kubernetes' await overrides, read from an object's annotations (provider/pkg/metadata/
# annotations.go and overrides.go): without `waitFor` a custom resource counts as created the moment
# the API server accepts it, and its customTimeouts bound nothing; `skipAwait` turns off the
# built-in wait of a kind (e.g. a Service's wait for ready endpoints).
PULUMI_WAIT_FOR = "pulumi.com/waitFor"
PULUMI_SKIP_AWAIT = "pulumi.com/skipAwait"

# The entrance (components/entrance, docs/routing.md): one Gateway in front of every model.
# The llm-d-router chart that runs each base model's endpoint picker and renders its InferencePool
# (llm-d/llm-d-router v0.10.0 config/charts/llm-d-router-gateway), the label its templates put on
# the picker's pods (routerlib templates/_helpers.tpl "llm-d-router.selectorLabels":
# `llm-d-router-gateway: <release, cut to 40 characters>-epp`), and the value paths that say which
# pods the pool selects, on which port, and how many pickers run. The policy pack reads the same.
PICKER_CHART = "llm-d-router-gateway"
PICKER_POD_LABEL = "llm-d-router-gateway"
PICKER_NAME_SUFFIX = "-epp"
PICKER_RELEASE_NAME_CHARS = 40


def picker_name(release: str) -> str:
    """The picker's Deployment, Service and pod label value for a release of PICKER_CHART."""
    return f"{release.lower().strip()[:PICKER_RELEASE_NAME_CHARS]}{PICKER_NAME_SUFFIX}"


# The header the Gateway routes on: the base model of the requested model (a base model maps to
# itself, an adapter to its base). Gateway API Inference Extension's body-based routing and the
# llm-d-router chart's HTTPRoute use this name (gateway-api-inference-extension@v1.5.0
# site-src/guides/serving-multiple-inference-pools-latest.md; llm-d-router-gateway
# templates/httproute.yaml at v0.10.0).
BASE_MODEL_HEADER = "X-Gateway-Base-Model-Name"

# On a created cluster (EKS tags, GKE resource labels, whose keys and values allow only lower-case
# letters, digits, '-' and '_'): the stack's security profile, and the explicit acceptance of an API
# endpoint open to every address (security.clusterEndpoint.allowWorldOpen). The policy pack's
# cluster-endpoint-restricted rule reads both, so the program and the rule agree on one spelling.
CLUSTER_PROFILE_TAG = "llm-serving-profile"
PRODUCTION_PROFILE = "production"
WORLD_OPEN_ENDPOINT_TAG = "llm-serving-world-open-endpoint"
WORLD_OPEN_ALLOWED = "allowed"

# What enforces the serving namespace's NetworkPolicies: an annotation of that Namespace naming the
# cluster's enforcing dataplane (NETWORK_POLICY_ENFORCERS). On a cluster the program creates it names
# what the program turned on (GKE Dataplane V2, the EKS VPC CNI's network policy agent); on an
# existing cluster, what the stack file declares (security.networkPolicyEnforcement). The policy
# pack's network-policy-present rule reads it where the stack has no cluster resource to judge.
NETWORK_POLICY_ENFORCEMENT_ANNOTATION = f"{PREFIX}/network-policy-enforcement"
GKE_DATAPLANE_V2 = "gke-dataplane-v2"
EKS_VPC_CNI = "eks-vpc-cni"
NETWORK_POLICY_ENFORCERS = (GKE_DATAPLANE_V2, "gke-calico", EKS_VPC_CNI, "calico", "cilium", "antrea", "other")
