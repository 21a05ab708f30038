"""How each GPU pool gets its nodes: which autoscaler (if any) grows it, from how many to how many.

Decided once here, from the validated config; the cluster layer builds exactly this (a Karpenter
NodePool, a GKE node pool autoscaler, a fixed node group) and the planner counts only the nodes it
says the pool can reach, so a plan never relies on capacity nothing would deliver.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from stack_config.cluster import Cloud, PoolConfig

if TYPE_CHECKING:
    from stack_config.stack import StackConfig


class Autoscaler(StrEnum):
    # A created EKS cluster: Karpenter launches the nodes above minNodes for pending pods.
    karpenter = "karpenter"
    # GKE: every node pool this program creates has GKE's cluster autoscaler on.
    gke = "gke-cluster-autoscaler"
    # An EKS cluster this program did not create: the node groups keep their size.
    none = "none"
    # `cloud: existing`: the stack describes the cluster's own nodes (and whatever grows them).
    declared = "declared by the stack (existing cluster)"


@dataclass(frozen=True)
class PoolScaling:
    autoscaler: Autoscaler
    # Nodes the pool has before any pod asks for one.
    start_nodes: int
    # The most nodes the pool can have; what the planner may count on.
    reachable_nodes: int
    # Why the pool cannot grow, for messages (empty when it can).
    why_fixed: str = ""

    @property
    def can_grow(self) -> bool:
        return self.reachable_nodes > self.start_nodes

    @property
    def starts_empty(self) -> bool:
        return self.start_nodes == 0


def initial_nodes(pool: PoolConfig) -> int:
    return pool.desiredNodes if pool.desiredNodes is not None else pool.minNodes


def pool_scaling(stack: StackConfig, pool: PoolConfig) -> PoolScaling:
    if stack.cloud == Cloud.aws:
        if stack.cluster.create:
            # Karpenter grows the pool from its always-on managed node group (minNodes) to maxNodes.
            return PoolScaling(Autoscaler.karpenter, pool.minNodes, pool.maxNodes)
        size = initial_nodes(pool)
        return PoolScaling(
            Autoscaler.none,
            size,
            size,
            why_fixed=(
                "the cluster was not created by this stack (cluster.create false), so no autoscaler is "
                "installed and the node group keeps its desired size (desiredNodes, default minNodes)"
            ),
        )
    if stack.cloud == Cloud.gcp:
        return PoolScaling(Autoscaler.gke, initial_nodes(pool), pool.maxNodes)
    return PoolScaling(Autoscaler.declared, pool.minNodes, pool.maxNodes)
