"""NVIDIA GPU Operator: what a GPU node needs before a pod can use its GPUs."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from common import gpu_metrics
from components.addons.crd_sources import custom_resource
from components.operators.args import OperatorsArgs
from components.operators.gpu_alerts import gpu_prometheus_rule
from components.operators.namespace import operator_namespace
from components.operators.values import (
    GPU_OPERATOR_CHART,
    NVIDIA_HELM_REPO,
    TIME_SLICING_CONFIG_KEY,
    device_plugin_time_slicing_config,
    gpu_operator_values,
    nfd_owner,
)

# Fixed Helm release name: the chart names its objects after it, and a Pulumi auto-name suffix
# would rename them on every replacement.
RELEASE_NAME = "gpu-operator"
SERVICE_MONITOR_API_VERSION = "monitoring.coreos.com/v1"
TIME_SLICING_CONFIG_MAP = "device-plugin-config"
# The DCGM exporter's counters file (common/gpu_metrics.py): the default series plus what the GPU
# alerts need. Must exist before the operator deploys the exporter, which reads it at start.
DCGM_METRICS_CONFIG_MAP = "dcgm-exporter-metrics"
GPU_ALERTS_RULE = "gpu-alerts"
# Helm waits for the operator Deployment and NFD (master, gc, worker DaemonSet) to be ready:
# images come from nvcr.io and the NFD worker must start on every node. The operands (driver,
# device plugin, DCGM) are created afterwards by the operator itself and are not awaited here.
HELM_TIMEOUT_SECONDS = 600


class GpuOperator(pulumi.ComponentResource):
    """The gpu-operator Helm release (pinned), its namespace, the device-plugin sharing config, the
    DCGM exporter's counters file and, with monitoring, the GPU alerts.

    Servers depend on `ready`; pass the node pools as `depends_on` in `opts`.
    """

    namespace: pulumi.Output[str]
    release_status: pulumi.Output
    ready: list[pulumi.Resource]
    namespace_resource: k8s.core.v1.Namespace
    values: dict

    def __init__(self, name: str, args: OperatorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:GpuOperator", name, None, opts)
        options = args.config.gpuOperator
        child = pulumi.ResourceOptions(parent=self)
        # Children do not inherit a component's depends_on; the namespace is the root of the chain.
        first = pulumi.ResourceOptions(parent=self, depends_on=(opts.depends_on if opts else None))

        ns, before_helm = operator_namespace(name, args.config.namespace, args.cloud, first, args.psa_version)
        self.namespace_resource = ns

        config_map_name = None
        if options.timeSlicingReplicas:
            config_map = k8s.core.v1.ConfigMap(
                f"{name}-time-slicing",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=TIME_SLICING_CONFIG_MAP, namespace=ns.metadata.name),
                data={
                    TIME_SLICING_CONFIG_KEY: device_plugin_time_slicing_config(
                        options.timeSlicingReplicas, options.migStrategy
                    )
                },
                opts=child,
            )
            before_helm.append(config_map)
            config_map_name = TIME_SLICING_CONFIG_MAP

        if options.dcgmServiceMonitor:
            # Helm refuses the whole release when one rendered object's kind is unknown.
            if args.crds is None:
                raise ValueError(
                    "the GPU Operator's DCGM ServiceMonitor needs the Prometheus Operator CRDs: "
                    "pass OperatorsArgs.crds (components/addons) or turn dcgmServiceMonitor off"
                )
            before_helm += args.crds.depends_on(SERVICE_MONITOR_API_VERSION, "ServiceMonitor")

        dcgm_metrics = k8s.core.v1.ConfigMap(
            f"{name}-dcgm-metrics",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=DCGM_METRICS_CONFIG_MAP, namespace=ns.metadata.name),
            data={gpu_metrics.METRICS_CONFIG_KEY: gpu_metrics.metrics_csv()},
            opts=child,
        )
        before_helm.append(dcgm_metrics)

        self.values = gpu_operator_values(
            args.cloud,
            options.driver,
            options,
            list(args.placements),
            nfd_owner(True, args.config.networkOperator.enabled),
            gke_driver_version=args.gke_driver_version,
            network_operator=args.config.networkOperator.enabled,
            time_slicing_config_map=config_map_name,
            dcgm_metrics_config_map=DCGM_METRICS_CONFIG_MAP,
            image_mirrors=args.image_mirrors,
        )
        release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=RELEASE_NAME,
                chart=GPU_OPERATOR_CHART,
                version=options.chartVersion,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NVIDIA_HELM_REPO),
                namespace=ns.metadata.name,
                create_namespace=False,
                values=self.values,
                # A failed install is uninstalled, so the next `pulumi up` starts clean instead of
                # meeting a half-installed release ("cannot re-use a name that is still in use").
                atomic=True,
                cleanup_on_fail=True,
                skip_await=False,
                timeout=HELM_TIMEOUT_SECONDS,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=before_helm),
        )
        alerting = args.gpu_alerting
        if alerting is not None and options.dcgmServiceMonitor:
            # Evaluated cluster-wide whatever its namespace; next to the exporter it watches.
            rule = gpu_prometheus_rule(
                GPU_ALERTS_RULE, args.config.namespace, alerting.rule_labels, alerting.runbook_url
            )
            if args.crds is None:
                raise ValueError(
                    "the GPU alerts' PrometheusRule needs the Prometheus Operator CRDs: "
                    "pass OperatorsArgs.crds (components/addons)"
                )
            custom_resource(
                f"{name}-gpu-alerts",
                {**rule, "metadata": {**rule["metadata"], "namespace": ns.metadata.name}},
                args.crds,
                child,
            )
        self.namespace = ns.metadata.name
        self.release_status = release.status
        self.ready = [release]
        self.register_outputs({"namespace": self.namespace, "releaseStatus": self.release_status})
