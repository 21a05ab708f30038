"""Stack rules: facts that only hold across resources.

gpu-toleration-matches-pool: a GPU pod must tolerate every hard taint (NoSchedule, NoExecute) of
at least one GPU pool in the stack, value included; tolerating the key with the wrong value leaves
the pod Pending exactly as no toleration would.

server-disruption-budget: a GPU server with more than one replica has a PodDisruptionBudget in its
namespace whose selector matches its pods, so a node drain or upgrade never takes every replica
(and its minutes-long weight load) down at once.
"""

from __future__ import annotations

from policies.gpu import is_gpu_container, pod_tolerates, pod_uses_gpus
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.cloud import POOL_TYPES, node_pool_has_gpus, pool_taints
from policies.workloads import workload


def gpu_pools(resources: list[Resource]) -> list[tuple[Resource, list[dict]]]:
    return [(r, pool_taints(r.type, r.props)) for r in resources
            if r.type in POOL_TYPES and node_pool_has_gpus(r.type, r.props)]


def _describe(taints: list[dict]) -> str:
    return ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in taints) or "no taints"


def gpu_toleration_matches_pool(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    pools = gpu_pools(resources)
    if not pools:
        return []
    out = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None:
            continue
        for pod in w.pods:
            if not pod_uses_gpus(pod):
                continue
            fits = False
            for _, taints in pools:
                hard = [t for t in taints if t["effect"] in ("NoSchedule", "NoExecute")]
                if all(pod_tolerates(pod, as_str(t["key"]) or "", t["effect"],
                                     None if is_unknown(t.get("value")) else (as_str(t.get("value")) or ""))
                       for t in hard):
                    fits = True
                    break
            if not fits:
                gpu = next(c for c in pod.containers if is_gpu_container(c))
                pool_list = "; ".join(f"{p.kind}/{p.name} ({_describe(t)})" for p, t in pools)
                out.append((r, Finding(
                    f"{w.ref}: the pod of GPU {gpu.label} ({pod.where}) does not tolerate the taints of any GPU "
                    f"pool in the stack [{pool_list}]; add tolerations that match one pool's taints (key, value and "
                    f"effect) or the pod will stay Pending.", gpu.name)))
    return out


def selector_matches(selector: dict, labels: dict) -> bool:
    """Kubernetes LabelSelector semantics; an empty selector in policy/v1 selects every pod."""
    for k, v in as_dict(selector.get("matchLabels")).items():
        if is_unknown(v) or is_unknown(labels.get(k)):
            continue
        if labels.get(k) != v:
            return False
    for expr in as_list(selector.get("matchExpressions")):
        expr = as_dict(expr)
        key, op, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _same_namespace(a: str | None, b: str | None) -> bool:
    if is_unknown(a) or is_unknown(b):
        return True
    return (a or "default") == (b or "default")


def server_disruption_budget(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    pdbs = [r for r in resources if r.is_kubernetes and r.kind == "PodDisruptionBudget"]
    out = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None or not w.long_running or w.replicas is None or w.replicas <= 1:
            continue
        for pod in w.pods:
            if not pod_uses_gpus(pod):
                continue
            covered = any(_same_namespace(p.namespace, w.namespace)
                          and isinstance(as_dict(p.props.get("spec")).get("selector"), dict)
                          and selector_matches(as_dict(p.props["spec"]["selector"]), pod.labels)
                          for p in pdbs)
            if not covered:
                gpu = next(c for c in pod.containers if is_gpu_container(c))
                out.append((r, Finding(
                    f"{w.ref}: this GPU server ({gpu.label}) runs {w.replicas:g} replicas but no PodDisruptionBudget in "
                    f"namespace '{w.namespace or 'default'}' selects its pods ({pod.where}); add a PodDisruptionBudget with "
                    f"maxUnavailable: 1 and a selector matching the pod labels so a drain never takes all replicas "
                    f"down at once.", gpu.name)))
                break
    return out


def toleration_rule_not_applicable(resources: list[Resource]) -> str | None:
    if not gpu_pools(resources):
        return "the stack declares no GPU node pool (its cluster's pools are managed elsewhere)"
    return None
