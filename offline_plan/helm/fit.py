"""Do the pods that land on the system pool fit its nodes, and on how many?

What a node offers pods is its allocatable CPU, memory and pod count (machines.py). A DaemonSet
that schedules on the pool takes its request on every node; the replicas of Deployments and
StatefulSets are packed first-fit-decreasing onto as few nodes as hold them, each replica whole
on one node (the scheduler never splits a pod), and no two replicas of a workload whose required
pod anti-affinity spreads it by host share a node. That count is the fewest nodes the pods need;
the scheduler spreads pods more widely and the autoscaler adds a node when one stays pending, up
to the pool's maximum. Run-once Jobs (install hooks, mirror Jobs) are counted apart: while they
run they need room too, and a Job that finds none waits rather than fails.

Pods with no request take no share here (the scheduler counts them as zero too,
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#how-pods-with-resource-requests-are-scheduled),
so they are listed: what they really use comes out of the nodes' headroom.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_plan.helm import machines, quantities
from offline_plan.helm.pods import PodSummary
from offline_plan.helm.pools import Pool

RUN_ONCE = "run once"
PER_NODE = "per node"
# The stack file's keys of the system pool (stack_config/cluster.py, SystemPoolConfig).
MAX_NODES_KEY = "cluster.systemPool.maxNodes"
MACHINE_KEY = "cluster.systemPool.machineType"


@dataclass(frozen=True)
class Placed:
    owner: str
    """The release (`namespace/name`) or `the program`."""
    pod: PodSummary


@dataclass
class Need:
    cpu: float = 0.0
    memory: float = 0.0
    pods: int = 0

    def add(self, pod: PodSummary, times: int = 1) -> None:
        self.cpu += pod.cpu * times
        self.memory += pod.memory * times
        self.pods += times


@dataclass
class Fit:
    pool: Pool
    node: machines.Allocatable | None
    per_node: Need
    """The DaemonSets' requests on each node."""
    replicated: Need
    jobs: Need
    nodes: int | None
    """Fewest nodes that hold the DaemonSets and every replica; None when the machine is unknown."""
    nodes_with_jobs: int | None
    too_large: list[str] = field(default_factory=list)
    """Pods that no node of the pool can hold even empty."""
    unset: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.nodes is not None and not self.too_large and self.nodes <= self.pool.max_nodes


@dataclass
class _Item:
    ref: str
    cpu: float
    memory: float
    spread: str | None


def _pack(items: list[_Item], room: Need) -> tuple[int, list[str]]:
    """First-fit decreasing; returns the node count and the items that fit on no empty node."""
    if room.cpu <= 0 or room.memory <= 0 or room.pods <= 0:
        return 0, [i.ref for i in items]

    def size(i: _Item) -> float:
        return max(i.cpu / room.cpu, i.memory / room.memory)

    nodes: list[tuple[Need, set[str]]] = []
    too_large: list[str] = []
    for item in sorted(items, key=lambda i: (-size(i), i.ref)):
        if item.cpu > room.cpu or item.memory > room.memory:
            too_large.append(item.ref)
            continue
        for used, spread in nodes:
            if (
                used.cpu + item.cpu <= room.cpu
                and used.memory + item.memory <= room.memory
                and used.pods + 1 <= room.pods
                and (item.spread is None or item.spread not in spread)
            ):
                break
        else:
            nodes.append((Need(), set()))
            used, spread = nodes[-1]
        used.cpu, used.memory, used.pods = used.cpu + item.cpu, used.memory + item.memory, used.pods + 1
        if item.spread is not None:
            spread.add(item.spread)
    return len(nodes), sorted(set(too_large))


def _items(placed: list[Placed]) -> list[_Item]:
    items = []
    for p in placed:
        ref = f"{p.owner} {p.pod.ref}"
        for n in range(1 if p.pod.count == RUN_ONCE else int(p.pod.replicas)):
            items.append(_Item(f"{ref} #{n + 1}", p.pod.cpu, p.pod.memory, ref if p.pod.spread_by_host else None))
    return items


def fit(pool: Pool, placed: list[Placed], stack: str) -> Fit:
    """`placed`: the pods that schedule on `pool` (placement.py) and ask for no GPU."""
    m = machines.machine(pool.cloud, pool.machine_type)
    node = machines.allocatable(pool.cloud, m) if m is not None else None
    daemons = [p for p in placed if p.pod.count == PER_NODE]
    jobs = [p for p in placed if p.pod.count == RUN_ONCE]
    replicated = [p for p in placed if p.pod.count not in (PER_NODE, RUN_ONCE)]
    per_node, steady, once = Need(), Need(), Need()
    for p in daemons:
        per_node.add(p.pod)
    for p in replicated:
        steady.add(p.pod, int(p.pod.replicas))
    for p in jobs:
        once.add(p.pod)
    result = Fit(pool, node, per_node, steady, once, None, None)
    result.unset = sorted({f"{p.owner} {p.pod.ref}" for p in placed if p.pod.unset})
    stack_file = f"Pulumi.{stack}.yaml"
    if node is None:
        result.warnings.append(
            f"{stack_file}: the system pool's machine type {pool.machine_type} is not in "
            "offline_plan/helm/machines.py, so the plan cannot say whether the add-ons fit it; add its vCPUs and "
            f"memory there (with the cloud's page), or set `{MACHINE_KEY}` to a type it lists"
        )
        return result
    room = Need(node.cpu - per_node.cpu, node.memory - per_node.memory, node.pods - per_node.pods)
    result.nodes, result.too_large = _pack(_items(replicated), room)
    result.nodes_with_jobs, too_large_jobs = _pack(_items(replicated + jobs), room)
    result.too_large = sorted(set(result.too_large) | set(too_large_jobs))
    shape = (
        f"{pool.machine_type} ({quantities.cpu(node.cpu)} CPU, {quantities.memory(node.memory)} allocatable, "
        f"{quantities.cpu(room.cpu)} CPU and {quantities.memory(room.memory)} left by the DaemonSets)"
    )
    if result.too_large:
        result.warnings.append(
            f"{stack_file}: no node of the system pool, {shape}, can hold "
            + ", ".join(f"`{r.rsplit(' #', 1)[0]}`" for r in result.too_large)
            + f"; such a pod stays Pending. Set `{MACHINE_KEY}` to a larger type"
        )
    if result.nodes > pool.max_nodes:
        result.warnings.append(
            f"{stack_file}: the system pool's pods need {result.nodes} nodes of {shape} "
            f"({quantities.cpu(steady.cpu)} CPU and {quantities.memory(steady.memory)} requested by replicas), but "
            f"`{MAX_NODES_KEY}` is {pool.max_nodes}: the rest stay Pending. Raise `{MAX_NODES_KEY}` to "
            f"{result.nodes} or set `{MACHINE_KEY}` to a larger type"
        )
    return result
