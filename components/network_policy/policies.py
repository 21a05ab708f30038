"""`ServingNetworkPolicies`: the serving namespace's NetworkPolicies (components/network_policy/
rules.py) for the stack as configured, and the spec they are built from.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

import stack_config as cfg
from common import contract
from components.addons import agentgateway
from components.cluster.gcp import network as gke_network
from components.entrance import picker
from components.entrance.entrance import GATEWAY_NAME
from components.model_store import store
from components.network_policy.rules import (
    DEFAULT_DENY,
    GATEWAY_POD_FACT,
    GKE_EXT_PROC_FACT,
    IDENTITY_FACT,
    PRIVATE_RANGES,
    Entrance,
    NetworkPolicySpec,
    ServerGroup,
    network_policies,
)
from components.serving import kserve, vllm
from components.verification import job as verification_job
from planner.plan import ModelPlan
from stack_config.entrance import implementation_for


def server_group(plan: ModelPlan, has_bucket: bool) -> ServerGroup:
    """One model's server pods as the policies select them."""
    model = plan.model
    if model.engine == "kserve":
        # KServe's storage initializer (in the predictor pod) copies hf:// and bucket URIs; only a
        # pvc:// claim (storage bucket on a cluster without a bucket) is mounted instead.
        downloads = model.kserveStorage == "hf" or has_bucket
        return ServerGroup(
            plan.served_name, (kserve.COMPONENT, f"{kserve.COMPONENT}-canary"), kserve.HTTP_PORT, downloads=downloads
        )
    return ServerGroup(
        plan.served_name,
        (vllm.COMPONENT_SERVER,),
        contract.SERVER_PORT,
        worker_components=(vllm.COMPONENT_WORKER,),
        multi_node=plan.nodes_per_replica > 1,
        # vLLM streams the weights from the bucket itself (Run:ai streamer).
        downloads=plan.load_from == "bucket",
    )


def network_policy_spec(stack: cfg.StackConfig, plans: Sequence[ModelPlan]) -> NetworkPolicySpec:
    """The paths this stack's pods need, from the config and the per-model plans."""
    entrance = stack.exposure.entrance
    kind: Entrance = "none"
    controller: str | None = None
    controller_port: int | None = None
    proxies: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    if entrance is not None:
        impl = implementation_for(stack.cloud.value, stack.creates_cluster, entrance)
        if impl.name == "agentgateway":
            kind = "in-cluster"
            # On a cluster this program creates, agentgateway's controller is where the add-on puts it.
            controller = agentgateway.NAMESPACE if stack.creates_cluster else None
            controller_port = agentgateway.XDS_PORT if stack.creates_cluster else None
        elif impl.name == "gke":
            kind = "gke"
            created_network = stack.creates_cluster and stack.cluster.network.vpc == "create"
            # The proxy-only subnet this stack creates; on another network its range is the
            # network owner's, so any private range stands in for it.
            proxies = (gke_network.PROXY_ONLY_RANGE,) if created_network else PRIVATE_RANGES[:3]
            checks = gke_network.HEALTH_CHECK_RANGES
        else:
            kind = "anywhere"
    clients = list(stack.security.allowedClientNamespaces)
    if stack.exposure.gateway is not None:
        clients.append(stack.exposure.gateway.namespace)
    mirrors = any(not (p.model.engine == "kserve" and p.model.kserveStorage == "hf") for p in plans)
    return NetworkPolicySpec(
        namespace=stack.modelStore.namespace,
        cloud=stack.cloud.value,
        servers=tuple(server_group(p, stack.cloud != cfg.Cloud.existing) for p in plans),
        mirror_component=store.COMPONENT_MIRROR if mirrors else None,
        # __main__.py runs the verification Job whenever a vLLM model is served.
        verification_component=verification_job.COMPONENT if any(p.model.engine == "vllm" for p in plans) else None,
        entrance=kind,
        gateway_name=GATEWAY_NAME,
        gateway_controller_namespace=controller,
        gateway_controller_port=controller_port,
        gke_proxy_cidrs=proxies,
        gke_health_check_cidrs=checks,
        picker_ports=(picker.EXT_PROC_PORT, picker.METRICS_PORT),
        picker_health_port=picker.HEALTH_PORT,
        acme=entrance is not None and entrance.tls.certificate == "acme",
        monitoring_namespace=contract.MONITORING_NAMESPACE if stack.monitoring.enabled else None,
        client_namespaces=tuple(dict.fromkeys(clients)),
    )


def relevant_facts(spec: NetworkPolicySpec) -> list:
    """The outside facts this stack's policies rest on."""
    facts = [IDENTITY_FACT] if spec.cloud != "existing" else []
    if spec.entrance == "in-cluster":
        facts.append(GATEWAY_POD_FACT)
    if spec.entrance == "gke":
        facts.append(GKE_EXT_PROC_FACT)
    return facts


class ServingNetworkPolicies(pulumi.ComponentResource):
    """Default-deny and the allowed paths, in the serving namespace."""

    names: list[str]

    def __init__(
        self,
        name: str,
        spec: NetworkPolicySpec,
        namespace_ready: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-serving:k8s:ServingNetworkPolicies", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=namespace_ready)
        manifests = network_policies(spec)
        self.names = [m["metadata"]["name"] for m in manifests]

        def create(manifest: dict, opts: pulumi.ResourceOptions) -> k8s.networking.v1.NetworkPolicy:
            return k8s.networking.v1.NetworkPolicy(
                f"{name}-{manifest['metadata']['name']}",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=opts,
            )

        # The allowed paths first, default-deny last: a pod that starts in between (a mirror Job) never
        # finds its path closed; before default-deny exists nothing is closed yet.
        allows = [create(m, child) for m in manifests if m["metadata"]["name"] != DEFAULT_DENY]
        deny = next(m for m in manifests if m["metadata"]["name"] == DEFAULT_DENY)
        create(deny, pulumi.ResourceOptions(parent=self, depends_on=[*namespace_ready, *allows]))
        # What the plan shows: the policies, and the outside facts they rest on that are not settled.
        self.summary = {
            "policies": self.names,
            "unresolved": [
                f"{f.subject}: {f.describe()} ({f.source}); check: {f.resolve_with}"
                for f in relevant_facts(spec)
                if not f.established
            ],
        }
        self.register_outputs({"networkPolicies": self.names})
