"""Which add-ons a stack needs, and why: one pure decision from the stack config and the plans.

Every custom resource the program creates needs its CRD (and usually its controller) on the
cluster. A cluster the program creates gets the add-ons installed; on an existing cluster the
stack must declare them (`addons.preinstalled`), and the program only looks their CRDs up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.addons import (
    agentgateway,
    cert_manager,
    gateway_api,
    inference_extension,
    keda,
    kserve,
    leader_worker_set,
    llm_d_router,
    prometheus_operator,
)
from components.addons.catalog import AddOn
from planner.plan import ModelPlan
from stack_config import Cloud, StackConfig
from stack_config.entrance import implementation_for
from stack_config.stack import entrance_body_router

# In install order: an add-on's `requires` come before it.
CATALOG: tuple[AddOn, ...] = (
    prometheus_operator.ADDON,
    keda.ADDON,
    leader_worker_set.ADDON,
    gateway_api.ADDON,
    inference_extension.ADDON,
    llm_d_router.ADDON,
    cert_manager.ADDON,
    kserve.ADDON,
    agentgateway.ADDON,
)
BY_KEY = {addon.key: addon for addon in CATALOG}
# Add-ons installed differently when the stack needs more of them (same key, charts and CRDs, other
# values or requirements): cert-manager with Gateway API support for the entrance's certificate.
VARIANTS: tuple[AddOn, ...] = (
    cert_manager.WITH_GATEWAY_API,
    gateway_api.GKE_GATEWAY,
    gateway_api.GKE_GATEWAY_BODY_ROUTING,
)


def install_commands(addon: AddOn) -> list[str]:
    """The commands that install an add-on by hand, the add-ons it requires first."""
    return [cmd for key in addon.requires for cmd in install_commands(BY_KEY[key])] + addon.install_commands


@dataclass(frozen=True)
class AddOnNeed:
    addon: AddOn
    reasons: tuple[str, ...]
    provided_by: str | None = None
    """Set when the cluster itself provides the add-on (the program installs nothing for it)."""

    @property
    def key(self) -> str:
        return self.addon.key


def _reasons(stack: StackConfig, plans: Sequence[ModelPlan]) -> dict[str, list[str]]:
    reasons: dict[str, list[str]] = {addon.key: [] for addon in CATALOG}
    if stack.monitoring.enabled:
        reasons["prometheusOperator"].append(
            "monitoring.enabled: a ServiceMonitor and PrometheusRule per vLLM model, a PodMonitor per KServe model"
        )
    gpu = stack.operators.gpuOperator
    if gpu.enabled and gpu.dcgmServiceMonitor:
        reasons["prometheusOperator"].append(
            "operators.gpuOperator.dcgmServiceMonitor: the GPU Operator chart creates a ServiceMonitor for DCGM"
        )
    for plan in plans:
        model, key = plan.model, f"models[{plan.index}] ({plan.served_name})"
        if model.autoscaling.enabled and model.autoscaling.kind == "keda":
            reasons["keda"].append(f"{key} scales with autoscaling.kind keda (a ScaledObject)")
        if model.engine == "kserve":
            reasons["kserve"].append(f"{key} uses engine kserve (an InferenceService)")
        elif plan.nodes_per_replica > 1:
            reasons["leaderWorkerSet"].append(
                f"{key} spans {plan.nodes_per_replica} nodes per replica (a LeaderWorkerSet)"
            )
    if stack.exposure.gateway is not None:
        reasons["gatewayApi"].append("exposure.gateway: an HTTPRoute per model")
    entrance = stack.exposure.entrance
    if entrance is not None:
        reasons["gatewayApi"].append("exposure.entrance: the Gateway and its HTTPRoutes")
        reasons["inferenceExtension"].append("exposure.entrance: an InferencePool per base model")
        reasons["llmdRouter"].append(
            "exposure.entrance: the endpoint pickers find these kinds when they start "
            "(model aliases are InferenceModelRewrites)"
        )
        if entrance.tls.certificate == "acme":
            reasons["certManager"].append(
                "exposure.entrance.tls.certificate acme: cert-manager obtains the HTTPS certificate through the Gateway"
            )
        if implementation_for(stack.cloud.value, stack.creates_cluster, entrance).name == "agentgateway":
            reasons["agentgateway"].append(
                "exposure.entrance: the Gateway implementation (GatewayClass "
                "agentgateway) and its body-based routing policy"
            )
    return reasons


def _minor(stack: StackConfig) -> tuple[int, ...]:
    return tuple(int(part) for part in stack.cluster.kubernetesVersion.split("."))


def _gke_provides_gateway_api(stack: StackConfig) -> bool:
    """A created GKE cluster installs the Gateway API CRDs from 1.34, or whenever the entrance turns on
    its Gateway API (gateway_api_config, components/cluster/gcp/gke.py)."""
    return (
        stack.cloud == Cloud.gcp
        and stack.creates_cluster
        and (_minor(stack) >= gateway_api.GKE_INSTALLS_FROM_MINOR or stack.exposure.entrance is not None)
    )


def _gke_provides_inference_extension(stack: StackConfig) -> bool:
    return (
        stack.cloud == Cloud.gcp
        and stack.creates_cluster
        and _minor(stack) >= inference_extension.GKE_INSTALLS_FROM_MINOR
    )


def _variant(addon: AddOn, stack: StackConfig) -> AddOn:
    """The form of an add-on this stack installs."""
    entrance = stack.exposure.entrance
    if addon.key == cert_manager.ADDON.key and entrance is not None and entrance.tls.certificate == "acme":
        return cert_manager.WITH_GATEWAY_API
    if (
        addon.key == gateway_api.ADDON.key
        and entrance is not None
        and implementation_for(stack.cloud.value, stack.creates_cluster, entrance).name == "gke"
    ):
        return gateway_api.GKE_GATEWAY_BODY_ROUTING if entrance_body_router(stack) == "bbr" else gateway_api.GKE_GATEWAY
    return addon


def needed_addons(stack: StackConfig, plans: Sequence[ModelPlan]) -> list[AddOnNeed]:
    """The add-ons the stack's objects need, in install order, each with the reasons it is needed.

    On a created cluster an add-on's `requires` are needed too (KServe needs cert-manager); on an
    existing cluster they are the business of whoever installed the add-on.
    """
    reasons = _reasons(stack, plans)
    catalog = [_variant(addon, stack) for addon in CATALOG]
    if stack.creates_cluster:
        for addon in reversed(catalog):
            if reasons[addon.key]:
                for required in addon.requires:
                    reasons[required].append(f"{addon.title} needs it")
    needs = []
    for addon in catalog:
        if not reasons[addon.key]:
            continue
        provided_by = None
        if addon.key == gateway_api.ADDON.key and _gke_provides_gateway_api(stack):
            provided_by = (
                f"GKE {stack.cluster.kubernetesVersion} (the cluster's Gateway API, turned on for the entrance)"
                if stack.exposure.entrance is not None
                else f"GKE {stack.cluster.kubernetesVersion} (GKE installs the Gateway API CRDs from "
                "1.34.0-gke.1626000 on)"
            )
        if addon.key == inference_extension.ADDON.key and _gke_provides_inference_extension(stack):
            provided_by = (
                f"GKE {stack.cluster.kubernetesVersion} (GKE installs the Inference Extension CRDs from "
                "1.34.0-gke.1626000 on)"
            )
        needs.append(AddOnNeed(addon, tuple(reasons[addon.key]), provided_by))
    return needs


def undeclared_problems(stack: StackConfig, needs: Sequence[AddOnNeed], source: str) -> list[str]:
    """On an existing cluster, each needed add-on must be declared in addons.preinstalled."""
    if stack.creates_cluster:
        return []
    declared = set(stack.addons.preinstalled)
    problems = []
    for need in needs:
        if need.key in declared:
            continue
        commands = " && ".join(install_commands(need.addon))
        problems.append(
            f"{source}: addons.preinstalled: this stack needs {need.addon.title} {need.addon.version} "
            f"({'; '.join(need.reasons)}), and on an existing cluster the program installs no add-ons. "
            f"Install it ({commands}) and add `{need.key}` to addons.preinstalled"
        )
    return problems


def addon_table(needs: Sequence[AddOnNeed], creates_cluster: bool) -> list[dict[str, Any]]:
    """One row per needed add-on for the stack outputs and plan.md: what, which version, why, how."""
    rows = []
    for need in needs:
        if need.provided_by is not None:
            how = f"provided by {need.provided_by}"
        elif creates_cluster:
            how = "installed: " + "; ".join(
                f"{getattr(step, 'release', getattr(step, 'name', ''))} {step.version}" for step in need.addon.steps
            )
        else:
            how = "declared in addons.preinstalled; CRDs looked up at preview: " + ", ".join(
                crd.name for crd in need.addon.crds
            )
        rows.append(
            {
                "addon": need.key,
                "title": need.addon.title,
                "version": need.addon.version,
                "how": how,
                "reasons": list(need.reasons),
            }
        )
    return rows
