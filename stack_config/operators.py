"""NVIDIA GPU and Network Operator options."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator

from common.untrusted import excerpt
from stack_config.base import StrictModel
from stack_config.fields import KernelName, NicName
from stack_config.formats import dns_label, exact_chart_version
from stack_config.namespaces import own_namespace


class GpuOperatorConfig(StrictModel):
    enabled: bool = True
    """Install NVIDIA's GPU Operator (device plugin, GPU feature discovery, DCGM exporter)."""
    chartVersion: str = Field("v26.7.0", alias="chartVersion")
    """Exact gpu-operator Helm chart version from https://helm.ngc.nvidia.com/nvidia."""
    driver: Literal["auto", "operator", "preinstalled"] = "auto"
    """Who installs the driver and container toolkit. auto: preinstalled on EKS (AL2023 NVIDIA AMI) and GKE (GKE-managed
    drivers); set explicitly for `cloud: existing`."""
    migStrategy: Literal["none", "single", "mixed"] = Field("none", alias="migStrategy")
    """MIG strategy the device plugin advertises (only for MIG-capable GPUs)."""
    timeSlicingReplicas: int | None = Field(None, ge=2, le=64, alias="timeSlicingReplicas")
    """Share each GPU between N pods by time-slicing (dev/test only: no memory isolation)."""
    dcgmServiceMonitor: bool = Field(True, alias="dcgmServiceMonitor")
    """Create a ServiceMonitor for the DCGM exporter (needs the Prometheus Operator: installed on a created cluster,
    `addons.preinstalled` on an existing one)."""

    @field_validator("chartVersion")
    @classmethod
    def _version(cls, v: str) -> str:
        return exact_chart_version(v)


class NetworkOperatorConfig(StrictModel):
    enabled: bool = False
    """Install NVIDIA's Network Operator for RDMA/GPUDirect; needed only when pipeline parallelism crosses nodes."""
    chartVersion: str = Field("26.4.1", alias="chartVersion")
    """Exact network-operator Helm chart version from https://helm.ngc.nvidia.com/nvidia."""
    rdmaSharedDevices: list[KernelName] = Field(
        default_factory=lambda: ["mlx5_core"], max_length=32, alias="rdmaSharedDevices"
    )
    """Kernel drivers (ifNames/vendors are matched by the RDMA shared device plugin) exposed as
    rdma/rdma_shared_device_a."""
    ipRange: str = Field("192.168.100.0/24", alias="ipRange")
    """IP range (NVIDIA IPAM pool) of the secondary network NCCL uses."""
    interface: NicName | None = None
    """Host RDMA NIC (e.g. ens1f0) the secondary network's macvlan sits on; without it no network attachment is created
    (the CNI would pick the management interface)."""

    @field_validator("chartVersion")
    @classmethod
    def _version(cls, v: str) -> str:
        return exact_chart_version(v)

    @field_validator("ipRange")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            ipaddress.ip_network(v, strict=True)
        except ValueError as err:
            raise ValueError(
                f"{excerpt(v)} is not a network in CIDR form ({excerpt(str(err), 80)}); e.g. 192.168.100.0/24"
            ) from None
        return v


class OperatorsConfig(StrictModel):
    gpuOperator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig, alias="gpuOperator")
    """NVIDIA GPU Operator."""
    networkOperator: NetworkOperatorConfig = Field(default_factory=NetworkOperatorConfig, alias="networkOperator")
    """NVIDIA Network Operator."""
    namespace: str = "gpu-operator"
    """Namespace of the operators."""

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return own_namespace(dns_label(v))
