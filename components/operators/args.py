"""Typed arguments shared by the operator components."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from common.alerting import RUNBOOK_DOC
from common.pod_security import PSA_VERSION
from components.addons.crd_sources import CrdSources
from components.cluster.interface import GpuPlacement
from stack_config import OperatorsConfig


@dataclass(frozen=True)
class GpuAlerting:
    """The GPU alerts' PrometheusRule: labels the Prometheus' ruleSelector matches, and the runbook."""

    rule_labels: dict[str, str] = field(default_factory=dict)
    runbook_url: str = RUNBOOK_DOC


@dataclass(frozen=True)
class OperatorsArgs:
    """What both operators need from the stack.

    The Kubernetes provider and the node pools to wait for come through the ResourceOptions:
    `ResourceOptions(provider=cluster.provider, depends_on=[...node pools...])`. The components
    forward `depends_on` to their first child, so nothing is installed before a GPU node can join.
    """

    config: OperatorsConfig
    # "aws" | "gcp" | "existing": which node images (and so which driver setup) the pools run.
    cloud: str
    placements: Sequence[GpuPlacement]
    # GKE pools' gpu-driver-version (PoolConfig.gkeDriverVersion, the same on every pool);
    # decides whether GKE or the operator runs the device plugin. Ignored off GKE.
    gke_driver_version: str | None = None
    # Where custom resource kinds come from (components/addons): the GPU Operator chart renders a
    # ServiceMonitor for DCGM when `dcgmServiceMonitor` is on, so its release waits for that CRD.
    crds: CrdSources | None = None
    # Where the GPU alerts go; None: no GPU PrometheusRule (monitoring off, or no Prometheus
    # Operator to scrape the exporter: operators.gpuOperator.dcgmServiceMonitor false).
    gpu_alerting: GpuAlerting | None = None
    # images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors); the
    # operands' images from the table go through it (common/images.py chart_image).
    image_mirrors: Mapping[str, str] = field(default_factory=dict)
    # The Pod Security policy version the operators' namespace pins: the cluster's minor version.
    psa_version: str = PSA_VERSION


@dataclass(frozen=True)
class NetworkOperatorArgs(OperatorsArgs):
    # Host NIC (e.g. "ens1f0") the secondary network enslaves. Without it no MacvlanNetwork is
    # created: the CNI would otherwise pick the default-route (management) interface.
    rdma_interface: str | None = None
    # Namespace of the servers: the MacvlanNetwork's NetworkAttachmentDefinition lands there.
    workload_namespace: str = "default"
