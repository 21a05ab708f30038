"""Every rule of the pack, once: name, description, default level, config schema and function.

The Pulumi pack (policies/pack.py) and the manifest checker (policies/check.py) both build on this
list, so a rule cannot exist in one and not the other.

Enforcement levels: every rule is mandatory by default. Each guards a failure that reaches users
(a Pending GPU pod, a crash-looping server, a silently different model, a leaked token, a public
bucket) rather than a style preference; an operator who disagrees sets the level per policy in
the pack config ({"<policy>": {"enforcementLevel": "advisory"}}).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from common.contract import GPU_TAINT_KEY
from common.pod_security import PSA_VERSION
from policies.objects import Finding
from policies.resource import Resource
from policies.rules import (
    allow_all,
    cloud,
    config_map_secrets,
    env_once,
    exposure,
    gpus,
    helm,
    host_access,
    images,
    models,
    network,
    pod_security,
    probes,
    psa_version,
    resources,
    routing,
    secrets,
    stack,
)
from policies.workloads import workload

MANDATORY, ADVISORY, DISABLED = "mandatory", "advisory", "disabled"
LEVELS = (MANDATORY, ADVISORY, DISABLED, "remediate")


@dataclass
class Rule:
    name: str
    description: str
    # One sentence telling the owner of a violating resource what to change (README rules table).
    fix: str
    # Resource rules: (Resource, config) -> findings. Stack rules: (resources, config) -> [(Resource, Finding)].
    check: Callable
    level: str = MANDATORY
    # JSON-schema properties for PolicyConfigSchema; their "default"s are the effective defaults.
    schema: dict = field(default_factory=dict)
    stack: bool = False
    # Which resource types a resource rule looks at; None = every Kubernetes object.
    applies: Callable[[Resource], bool] | None = None
    # Stack rules: a reason why the rule does not apply to these resources, or None.
    stack_not_applicable: Callable[[list[Resource]], str | None] | None = None

    def defaults(self) -> dict:
        return {k: v["default"] for k, v in self.schema.items() if "default" in v}


def _k8s(fn: Callable[[dict, dict], list[Finding]]) -> Callable[[Resource, dict], list[Finding]]:
    return lambda r, config: fn(r.props, config)


def _typed(fn) -> Callable[[Resource, dict], list[Finding]]:
    return lambda r, config: fn(r.type, r.name, r.props, config)


def _kubernetes(r: Resource) -> bool:
    """Kubernetes objects that carry a pod spec (the workload rules look at nothing else)."""
    return r.is_kubernetes and workload(r.props) is not None


TAINT_KEY_SCHEMA = {
    "taintKey": {
        "type": "string",
        "default": GPU_TAINT_KEY,
        "description": "Taint key GPU pools carry and GPU pods tolerate.",
    }
}

RULES: list[Rule] = [
    Rule(
        "image-tag-pinned",
        "Every container image names an explicit tag other than 'latest', or a digest.",
        "Pin each image to a version tag such as ':v0.32.0' or a digest '@sha256:...' "
        "(a digest for every image with requireDigest).",
        _k8s(images.image_tag_pinned),
        applies=_kubernetes,
        schema={
            "requireDigest": {
                "type": "boolean",
                "default": False,
                "description": "Require every image to carry a digest (@sha256:...).",
            }
        },
    ),
    Rule(
        "resources-declared",
        "Every container declares CPU and memory requests and a memory limit.",
        "Set resources.requests.cpu, resources.requests.memory and resources.limits.memory on every "
        "container (and limits.cpu with requireCpuLimit).",
        _k8s(resources.resources_declared),
        applies=_kubernetes,
        schema={
            "requireCpuLimit": {
                "type": "boolean",
                "default": False,
                "description": "Also require resources.limits.cpu.",
            }
        },
    ),
    Rule(
        "gpu-in-limits",
        "GPU resources appear in limits, and requests (when given) equal the limits.",
        "Put the GPU count in resources.limits and make any GPU request equal to it.",
        _k8s(resources.gpu_in_limits),
        applies=_kubernetes,
    ),
    Rule(
        "gpu-taint-tolerated",
        "A pod that requests GPUs tolerates the GPU node taint.",
        "Add a toleration for the GPU taint key (operator Exists, effect NoSchedule) to the pod spec.",
        _k8s(gpus.gpu_taint_tolerated),
        applies=_kubernetes,
        schema=dict(TAINT_KEY_SCHEMA),
    ),
    Rule(
        "probes-declared",
        "Long-running containers have liveness and readiness probes; GPU servers also a startup probe.",
        "Add livenessProbe and readinessProbe to each long-running container, and a startupProbe to GPU servers.",
        _k8s(probes.probes_declared),
        applies=_kubernetes,
    ),
    Rule(
        "startup-probe-budget",
        "A GPU server's startup probe outlasts its weight load; its liveness probe is lenient.",
        "Raise the startup probe's initialDelaySeconds + failureThreshold x periodSeconds to at least the "
        "load-time estimate and the configured minimum, and the liveness window to its minimum.",
        _k8s(probes.startup_probe_budget),
        applies=_kubernetes,
        schema={
            "minimumSeconds": {
                "type": "number",
                "minimum": 0,
                "default": probes.DEFAULT_MINIMUM_SECONDS,
                "description": "Smallest startup budget (initialDelaySeconds + failureThreshold "
                "x periodSeconds) for a GPU server, in seconds.",
            },
            "livenessMinimumSeconds": {
                "type": "number",
                "minimum": 0,
                "default": probes.DEFAULT_LIVENESS_MINIMUM_SECONDS,
                "description": "Smallest failureThreshold x periodSeconds of a GPU "
                "server's liveness probe, in seconds.",
            },
        },
    ),
    Rule(
        "model-revision-pinned",
        "Hub downloads, Hub models a vLLM server loads, --revision flags, hf:// URIs and the revision label "
        "name a 40-hex commit.",
        "Replace branch or tag names with the model's full 40-hex commit sha in --revision, hf:// URIs "
        "and the revision label; give a Hub model that vLLM serves a --revision.",
        _k8s(models.model_revision_pinned),
        applies=_kubernetes,
    ),
    Rule(
        "hub-offline-serving",
        "A server that reads mirrored weights sets HF_HUB_OFFLINE=1.",
        "Serve weights mirrored into a volume or bucket first, then set HF_HUB_OFFLINE=1 on the serving container so "
        "it never downloads at start-up.",
        _k8s(models.hub_offline_serving),
        applies=_kubernetes,
    ),
    Rule(
        "adapter-revision-pinned",
        "Every LoRA adapter a server loads is a mirrored folder named by its 40-hex commit, "
        "and none loads at run time.",
        "Mirror each adapter at a pinned commit and pass <mount>/<org>/<name>/<commit> in --lora-modules; remove "
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING.",
        _k8s(routing.adapter_revision_pinned),
        applies=_kubernetes,
    ),
    Rule(
        "no-literal-secrets",
        "Tokens and API keys come from Secrets (secretKeyRef), never from literal values.",
        "Move the token into a Secret and read it with env[].valueFrom.secretKeyRef.",
        _k8s(secrets.no_literal_secrets),
        applies=_kubernetes,
    ),
    Rule(
        "env-set-once",
        "A container names each environment variable once.",
        "Remove the earlier entries of a variable set twice in env, keeping the one the container should get.",
        _k8s(env_once.env_set_once),
        applies=_kubernetes,
    ),
    Rule(
        "no-secrets-in-config-maps",
        "No credential reaches a container from a ConfigMap (envFrom, configMapKeyRef or a ConfigMap volume).",
        "Move the credential from the ConfigMap into a Secret and read it with secretKeyRef or envFrom secretRef.",
        config_map_secrets.no_secrets_in_config_maps,
        stack=True,
    ),
    Rule(
        "no-host-access",
        "No pod shares the node's network, PID or IPC namespace, mounts a hostPath volume or binds a hostPort.",
        "Remove hostNetwork, hostPID, hostIPC, hostPath volumes and hostPort; use a Service, a PersistentVolumeClaim, "
        "a ConfigMap or an emptyDir instead.",
        _k8s(host_access.no_host_access),
        applies=_kubernetes,
    ),
    Rule(
        "no-projected-api-token",
        "No pod mounts a service-account token through a projected volume, unless its token waiver says why.",
        "Remove the projected serviceAccountToken source, or waive it with the pod template annotation "
        "llm-serving.io/pod-security-exception: 'automountServiceAccountToken: <reason>'.",
        _k8s(host_access.no_projected_api_token),
        applies=_kubernetes,
    ),
    Rule(
        "shm-size-limited",
        "A memory-backed /dev/shm volume has a sizeLimit.",
        "Give the memory-backed emptyDir mounted at /dev/shm a sizeLimit.",
        _k8s(resources.shm_size_limited),
        applies=_kubernetes,
    ),
    Rule(
        "pod-security-context",
        "Every container runs without privilege escalation, capabilities or root, under a seccomp profile, on a "
        "read-only root filesystem, and its pod mounts no API token, unless a pod annotation waives one with a reason.",
        "Set allowPrivilegeEscalation: false, capabilities.drop [ALL], seccompProfile RuntimeDefault, runAsNonRoot: "
        "true and readOnlyRootFilesystem: true on each container and automountServiceAccountToken: false on the pod; "
        "waive runAsNonRoot, readOnlyRootFilesystem or the token only in the llm-serving.io/pod-security-exception "
        "annotation with the reason. An image built to run as root (vllm/vllm-openai is) also needs a numeric "
        "runAsUser and writable emptyDir mounts for HOME and /tmp, or it cannot start: the program gives its servers "
        'uid 65532, HOME on an emptyDir and /tmp on another (docs/security.md, "Pods and namespaces").',
        _k8s(pod_security.pod_security_context),
        applies=_kubernetes,
    ),
    Rule(
        "namespace-pod-security",
        "Every Namespace enforces a Pod Security Admission level, and one weaker than restricted says why.",
        "Label the namespace pod-security.kubernetes.io/enforce: restricted, or the strictest level its pods meet "
        "with the reason in the llm-serving.io/pod-security-reason annotation.",
        _k8s(pod_security.namespace_pod_security),
        applies=lambda r: r.is_kubernetes and r.kind == "Namespace",
    ),
    Rule(
        "namespace-pod-security-version",
        "A Namespace's Pod Security enforce-version is 'latest' or no older than the cluster and the pack's minimum.",
        "Set pod-security.kubernetes.io/enforce-version to the cluster's minor version (such as 'v1.33') or 'latest'.",
        psa_version.namespace_pod_security_version,
        stack=True,
        schema={
            "minimumVersion": {
                "type": "string",
                "pattern": psa_version.VERSION_PATTERN,
                "default": PSA_VERSION,
                "description": "Oldest Pod Security policy version a namespace may pin ('v1.N').",
            }
        },
    ),
    Rule(
        "helm-chart-pinned",
        "Every Helm release or chart names one exact chart version.",
        "Set the chart version to one exact SemVer version such as '1.2.3', not a range or empty.",
        _typed(helm.helm_chart_pinned),
        applies=lambda r: r.type in helm.HELM_TYPES or r.type.startswith("kubernetes:helm.toolkit.fluxcd.io/"),
    ),
    Rule(
        "bucket-private",
        "Model buckets block public access and are encrypted.",
        "Turn on all four S3 public access block flags and name an SSE algorithm, or set GCS "
        "publicAccessPrevention 'enforced' with uniform bucket-level access.",
        _typed(cloud.bucket_private),
        applies=lambda r: r.type in cloud.BUCKET_TYPES,
    ),
    Rule(
        "gpu-pool-tainted",
        "An EKS node group or GKE node pool with GPUs carries the GPU taint.",
        "Add the GPU taint (the configured key, effect NO_SCHEDULE) to the GPU node group or node pool.",
        _typed(cloud.gpu_pool_tainted),
        applies=lambda r: r.type in cloud.POOL_TYPES,
        schema=dict(TAINT_KEY_SCHEMA),
    ),
    Rule(
        "gpu-toleration-matches-pool",
        "Every GPU workload tolerates the taints of a GPU pool of the stack.",
        "Make the pod's tolerations match the key, value and effect of every hard taint of one GPU pool.",
        stack.gpu_toleration_matches_pool,
        stack=True,
        stack_not_applicable=stack.toleration_rule_not_applicable,
    ),
    Rule(
        "server-disruption-budget",
        "A GPU server with more than one replica has a matching PodDisruptionBudget.",
        "Add a PodDisruptionBudget with maxUnavailable: 1 whose selector matches the server's pod labels.",
        stack.server_disruption_budget,
        stack=True,
    ),
    Rule(
        "inference-pool-selects-its-servers",
        "Every InferencePool (or picker chart release) selects server pods in its namespace "
        "that declare its target port.",
        "Set the pool's matchLabels to the server pods' labels and its target port to the port they declare.",
        routing.inference_pool_selects_its_servers,
        stack=True,
    ),
    Rule(
        "picker-highly-available",
        "Every endpoint picker runs more than one replica and a PodDisruptionBudget selects its pods.",
        "Run at least 2 picker replicas (router.epp.replicas) and add a PodDisruptionBudget with maxUnavailable: 1 "
        "selecting the picker pods.",
        routing.picker_highly_available,
        stack=True,
    ),
    Rule(
        "authenticated-exposure",
        "Every server a Gateway reaches (through an InferencePool or a routed Service) asks for an API key, "
        "unless its pods carry the allow-unauthenticated waiver.",
        "Set the apiKey secret so the servers read VLLM_API_KEY from a Secret (or pass --api-key $(VAR)), or set "
        "exposure.allowUnauthenticated: true to serve without a key on purpose.",
        exposure.authenticated_exposure,
        stack=True,
    ),
    Rule(
        "bucket-public-access-block-present",
        "Every S3 bucket of the stack has a BucketPublicAccessBlock.",
        "Add an aws.s3.BucketPublicAccessBlock whose bucket is this bucket's id, with all four flags true.",
        stack.bucket_public_access_block_present,
        stack=True,
        stack_not_applicable=stack.bucket_rule_not_applicable,
    ),
    Rule(
        "network-policy-present",
        "Every namespace the stack creates that runs GPU servers has a default-deny NetworkPolicy, on a cluster that "
        "enforces NetworkPolicy.",
        "Add a NetworkPolicy with podSelector {}, policyTypes [Ingress, Egress] and no rules in the servers' "
        "namespace, then allow only the paths they need; turn enforcement on (GKE datapathProvider "
        'ADVANCED_DATAPATH, the EKS vpc-cni add-on with enableNetworkPolicy "true") or, on an existing cluster, '
        "annotate the Namespace llm-serving.io/network-policy-enforcement with its enforcer.",
        network.network_policy_present,
        stack=True,
        stack_not_applicable=network.network_rule_not_applicable,
        schema={
            "everyNamespace": {
                "type": "boolean",
                "default": False,
                "description": "Judge every namespace with GPU servers, not only the "
                "namespaces the stack itself creates.",
            }
        },
    ),
    Rule(
        "network-policy-no-allow-all",
        "No NetworkPolicy beside a namespace's default-deny admits every peer on every port.",
        "Replace the allow-all rule with the peers (pod, namespace selectors or CIDRs) and ports the pods need.",
        allow_all.network_policy_no_allow_all,
        stack=True,
    ),
    Rule(
        "cluster-endpoint-restricted",
        "A production cluster's API endpoint is private or admits only listed addresses.",
        "Turn the public endpoint off, or list the administrators' CIDRs (EKS publicAccessCidrs, GKE master "
        "authorized networks) without 0.0.0.0/0; or tag the cluster llm-serving-world-open-endpoint=allowed.",
        _typed(network.cluster_endpoint_restricted),
        applies=lambda r: r.type in network.CLUSTER_TYPES,
        schema={
            "requireRestricted": {
                "type": "boolean",
                "default": False,
                "description": "Apply to every cluster, not only those tagged llm-serving-profile=production.",
            }
        },
    ),
]

BY_NAME = {r.name: r for r in RULES}


def level_and_config(rule: Rule, pack_config: dict | None) -> tuple[str, dict]:
    """Effective level and settings for `rule` from a Pulumi-shaped pack config:
    {"all": "advisory", "<policy>": "disabled" | {"enforcementLevel": ..., "<setting>": ...}}."""
    pack_config = pack_config or {}
    level, settings = rule.level, rule.defaults()
    for key in ("all", rule.name):
        value = pack_config.get(key)
        if isinstance(value, str):
            level = value
        elif isinstance(value, dict):
            level = value.get("enforcementLevel", level)
            if key == rule.name:
                settings.update({k: v for k, v in value.items() if k != "enforcementLevel"})
    return level, settings
