"""NVIDIA Network Operator: RDMA and a secondary network for NCCL across nodes.

Needed only when a replica spans nodes (pipeline parallelism over nodes); tensor parallelism
inside one node talks over NVLink/PCIe and needs none of this. See docs/operators.md.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from common import contract
from components.operators.args import NetworkOperatorArgs
from components.operators.gpu_operator import GpuOperator
from components.operators.namespace import operator_namespace
from components.operators.nic_cluster_policy import (
    IPPOOL_API_VERSION,
    IPPOOL_NAME,
    NIC_CLUSTER_POLICY_API_VERSION,
    NIC_CLUSTER_POLICY_NAME,
    RDMA_RESOURCE,
    READY,
    SECONDARY_NETWORK_NAME,
    ip_pool_spec,
    macvlan_network_spec,
    nic_cluster_policy_spec,
)
from components.operators.values import NETWORK_OPERATOR_CHART, NVIDIA_HELM_REPO, network_operator_values, nfd_owner

RELEASE_NAME = "network-operator"
HELM_TIMEOUT_SECONDS = 600
# The policy turns ready once its DaemonSets (RDMA device plugin, Multus, CNI plugins, NVIDIA IPAM)
# run on every GPU node: one wave of image pulls from nvcr.io per node, as for the operator's own
# release (HELM_TIMEOUT_SECONDS), twice for nodes that join while it rolls out.
POLICY_READY_SECONDS = 2 * HELM_TIMEOUT_SECONDS


class NetworkOperator(pulumi.ComponentResource):
    """The network-operator Helm release (pinned) plus the NicClusterPolicy it reconciles.

    With a `gpu_operator` given, it shares that operator's namespace and waits for its release,
    whose Node Feature Discovery (the only one in the cluster) labels the NICs.
    """

    namespace: pulumi.Output[str]
    ready: list[pulumi.Resource]
    values: dict
    nic_cluster_policy_spec: dict
    # What a multi-node server requests and attaches to.
    rdma_resource: str = RDMA_RESOURCE
    network_name: str | None

    def __init__(
        self,
        name: str,
        args: NetworkOperatorArgs,
        gpu_operator: GpuOperator | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-serving:k8s:NetworkOperator", name, None, opts)
        config = args.config.networkOperator
        placements = list(args.placements)

        if gpu_operator is not None:
            ns_name = gpu_operator.namespace
            before_helm: list[pulumi.Resource] = list(gpu_operator.ready)
        else:
            first = pulumi.ResourceOptions(parent=self, depends_on=(opts.depends_on if opts else None))
            ns, before_helm = operator_namespace(name, args.config.namespace, args.cloud, first, args.psa_version)
            ns_name = ns.metadata.name

        self.values = network_operator_values(
            placements,
            nfd_owner(gpu_operator is not None, True),
            chart_version=config.chartVersion,
            image_mirrors=args.image_mirrors,
        )
        release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=RELEASE_NAME,
                chart=NETWORK_OPERATOR_CHART,
                version=config.chartVersion,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NVIDIA_HELM_REPO),
                namespace=ns_name,
                create_namespace=False,
                values=self.values,
                atomic=True,
                cleanup_on_fail=True,
                skip_await=False,
                timeout=HELM_TIMEOUT_SECONDS,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=before_helm),
        )

        # The chart ships the NicClusterPolicy CRD but no policy; the operator deploys nothing
        # on the nodes until one named nic-cluster-policy exists.
        self.nic_cluster_policy_spec = nic_cluster_policy_spec(
            config.chartVersion, placements, config.rdmaSharedDevices
        )
        ready_wait = f"{POLICY_READY_SECONDS}s"
        policy = k8s.apiextensions.CustomResource(
            f"{name}-nic-cluster-policy",
            api_version=NIC_CLUSTER_POLICY_API_VERSION,
            kind="NicClusterPolicy",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=NIC_CLUSTER_POLICY_NAME, annotations={contract.PULUMI_WAIT_FOR: READY}
            ),
            spec=self.nic_cluster_policy_spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[release],
                custom_timeouts=pulumi.CustomTimeouts(create=ready_wait, update=ready_wait),
            ),
        )
        # The IPPool CRD is applied by the operator while it reconciles nvIpam (not by the chart):
        # the pool waits for the policy to be ready, by when the kind is served. Relying on the
        # provider's retry of an unknown kind would give the operator about a minute.
        pool = k8s.apiextensions.CustomResource(
            f"{name}-ip-pool",
            api_version=IPPOOL_API_VERSION,
            kind="IPPool",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=IPPOOL_NAME, namespace=ns_name),
            spec=ip_pool_spec(config.ipRange, placements),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        self.ready = [release, policy, pool]
        self.network_name = None
        if args.rdma_interface:
            network = k8s.apiextensions.CustomResource(
                f"{name}-secondary-network",
                api_version=NIC_CLUSTER_POLICY_API_VERSION,
                kind="MacvlanNetwork",
                # Pods name this network; the NetworkAttachmentDefinition exists once it is ready.
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=SECONDARY_NETWORK_NAME, annotations={contract.PULUMI_WAIT_FOR: READY}
                ),
                spec=macvlan_network_spec(args.rdma_interface, args.workload_namespace),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[pool]),
            )
            self.ready.append(network)
            self.network_name = SECONDARY_NETWORK_NAME
        self.namespace = pulumi.Output.from_input(ns_name)
        self.register_outputs({"namespace": self.namespace, "rdmaResource": self.rdma_resource})
