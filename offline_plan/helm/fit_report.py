"""plan.md's "Placement and fit" part of the Helm section: the pools the stack creates, where each
rendered pod (and each of the program's own) can schedule, and whether the system pool holds
what lands on it. `problems` are its warnings (a pod no pool accepts, a pod larger than a system
node, more nodes than the pool's maximum), listed at the end of the part and returned for callers."""

from __future__ import annotations

from dataclasses import dataclass, field

from common import gpus
from offline_plan.helm import machines, placement, quantities
from offline_plan.helm.engine import RenderedRelease
from offline_plan.helm.fit import Fit, Placed, fit
from offline_plan.helm.operands import operand_summaries
from offline_plan.helm.pods import PodSummary, summaries
from offline_plan.helm.pools import Pool, system_pool

PROGRAM = "the program"


@dataclass
class Report:
    lines: list[str]
    problems: list[str] = field(default_factory=list)
    fit: Fit | None = None
    placements: dict[str, list[str]] = field(default_factory=dict)
    """`owner Kind/name` -> the pools (`Pool.name`) it can schedule on."""


def placed_pods(rendered: list[RenderedRelease], own: list[PodSummary]) -> list[Placed]:
    found = [
        Placed(f"{r.release.namespace}/{r.release.name}", pod)
        for r in rendered
        for pod in summaries(r.objects) + operand_summaries(r.objects)
    ]
    return found + [Placed(PROGRAM, pod) for pod in own]


def _size(pool: Pool) -> str:
    m = machines.machine(pool.cloud, pool.machine_type)
    if m is not None:
        node = machines.allocatable(pool.cloud, m)
        return (
            f"{m.vcpus} vCPU, {m.memory_mib // 1024} GiB; allocatable {quantities.cpu(node.cpu)} CPU, "
            f"{quantities.memory(node.memory)}, {node.pods} pods"
        )
    found = gpus.find_machine(pool.cloud, pool.machine_type)
    if found is not None:
        gpu, shape = found
        return f"{shape.gpus} x {gpu.name}, {shape.vcpus} vCPU, {shape.memory_gib} GiB (common/gpus.py)"
    return "not in offline_plan/helm/machines.py"


def _pool_row(pool: Pool) -> str:
    size = _size(pool)
    labels = ", ".join(f"`{k}={v}`" for k, v in sorted(pool.labels.items()))
    taints = ", ".join(f"`{t}`" for t in pool.taints) or "none"
    return (
        f"| `{pool.pool}` | {pool.source} | {pool.machine_type} ({size}) | {pool.min_nodes}-{pool.max_nodes} "
        f"| {labels} | {taints} |"
    )


def _placement_rows(placed: list[Placed], found: list[Pool], report: Report) -> list[str]:
    rows = []
    for p in placed:
        results = placement.verdicts(p.pod, found)
        fits = [v for v in results if v.fits]
        key = f"{p.owner} {p.pod.ref}"
        report.placements[key] = [v.pool.name for v in fits]
        where = ", ".join(v.pool.short for v in fits)
        assumed = sorted({a for v in fits for a in v.assumed})
        if assumed:
            where += " (if the node's " + ", ".join(f"`{a}`" for a in assumed) + ")"
        if not fits:
            where = "**nowhere**"
            report.problems.append(
                f"{p.owner}: `{p.pod.ref}` can schedule on none of the stack's pools ("
                + "; ".join(f"{v.pool.pool}: {v.why_not}" for v in results)
                + "): its pods stay Pending. Give it a nodeSelector/tolerations that match a pool, or add a pool"
            )
        others = "; ".join(f"{v.pool.short}: {v.why_not}" for v in results if not v.fits)
        rows.append(f"| {p.owner} | `{p.pod.ref}` | {p.pod.count} | {where} | {others or '-'} |")
    return rows


def _nodes(n: int) -> str:
    return f"{n} node{'' if n == 1 else 's'}"


def _fit_lines(result: Fit) -> list[str]:
    pool, node = result.pool, result.node
    out = [
        "",
        f"**Fit on the system pool** (`{pool.pool}`, {pool.source}, {pool.min_nodes}-{pool.max_nodes} nodes):",
        "",
    ]
    if node is None:
        return [*out, *[f"- {w}" for w in result.warnings], ""]
    out += [
        (
            f"- One node offers {quantities.cpu(node.cpu)} CPU, {quantities.memory(node.memory)} and {node.pods} pods "
            f"({node.how})."
        ),
        (
            f"- DaemonSets on every node: {result.per_node.pods} pods, {quantities.cpu(result.per_node.cpu)} CPU, "
            f"{quantities.memory(result.per_node.memory)}."
        ),
        (
            f"- Replicas: {result.replicated.pods} pods, {quantities.cpu(result.replicated.cpu)} CPU, "
            f"{quantities.memory(result.replicated.memory)}; run-once Jobs: {result.jobs.pods} pods, "
            f"{quantities.cpu(result.jobs.cpu)} CPU, {quantities.memory(result.jobs.memory)}."
        ),
    ]
    if result.fits:
        verdict = (
            f"**fits on {_nodes(result.nodes or 0)}** of at most {pool.max_nodes} "
            f"(the pool keeps {max(pool.min_nodes, result.nodes or 0)} running: minNodes {pool.min_nodes})"
        )
    else:
        verdict = "**does not fit**: " + "; ".join(result.warnings)
    out.append(f"- Verdict: {verdict}.")
    jobs_fit = result.nodes_with_jobs is not None and result.nodes_with_jobs <= pool.max_nodes
    out.append(
        f"- With every run-once Job running at once: {_nodes(result.nodes_with_jobs or 0)}"
        + ("." if jobs_fit else f", more than {pool.max_nodes}: the Jobs wait for room and run one after another.")
    )
    if result.unset:
        out.append(
            "- Pods with a container that requests nothing (counted as zero; their real use comes out of the "
            "headroom): " + ", ".join(f"`{u}`" for u in result.unset) + "."
        )
    resolve = machines.UNRESOLVED_CAPACITY.resolve_with
    out.append(
        "- Not counted: the cloud's own pods on these nodes (CoreDNS, the CNI and kube-proxy DaemonSets, CSI "
        "drivers, logging and metrics agents); the Prometheus and Alertmanager pods are counted from their "
        "custom resources (offline_plan/helm/operands.py); "
        "capacity is the nominal machine (the kubelet reports the kernel's MemTotal, somewhat less). Settle on "
        f"a cluster: `{resolve}` and `kubectl describe nodes -l llm-serving.io/pool=system` (Allocated resources)."
    )
    return [*out, ""]


def report(rendered: list[RenderedRelease], own: list[PodSummary], found: list[Pool], stack: str) -> Report:
    out = ["### Placement and fit on the stack's pools", ""]
    system = system_pool(found)
    result = Report(out)
    if system is None:
        out += [
            (
                "The stack does not create the cluster's nodes (`cloud: existing` or `cluster.create: false`): "
                "their pools, labels, taints and sizes are unknown here, so whether each add-on pod can schedule "
                "and whether the add-ons fit is not checked. Settle on the cluster: `kubectl get nodes "
                "-o custom-columns=NAME:.metadata.name,TAINTS:.spec.taints,CPU:.status.allocatable.cpu,"
                "MEMORY:.status.allocatable.memory --show-labels`."
            ),
            "",
        ]
        return result
    out += [
        (
            "Pools the stack creates, with the labels and taints their nodes carry (the program's, and those the "
            "kubelet, the cloud and the autoscaler add):"
        ),
        "",
        "| pool | nodes from | machine | nodes | labels | taints |",
        "|---|---|---|---|---|---|",
        *[_pool_row(p) for p in found],
        "",
        "Where each pod can schedule (nodeSelector, required node affinity, tolerations against each pool):",
        "",
        "| release | workload | pods | can schedule on | not on |",
        "|---|---|---|---|---|",
    ]
    placed = placed_pods(rendered, own)
    out += _placement_rows(placed, found, result)
    on_system = [
        p
        for p in placed
        if p.pod.gpus == 0 and any(v.fits and v.pool is system for v in placement.verdicts(p.pod, found))
    ]
    result.fit = fit(system, on_system, stack)
    result.problems += result.fit.warnings
    out += _fit_lines(result.fit)
    if result.problems:
        out += ["**Warnings** (placement and fit):", "", *[f"- {w}" for w in result.problems], ""]
    return result
