"""Can a pod schedule on a pool? Its nodeSelector, required node affinity and tolerations against
the labels and taints the pool's nodes carry, as kube-scheduler's filters decide it.

- nodeSelector: every key/value must be a label of the node
  (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodeselector).
- requiredDuringSchedulingIgnoredDuringExecution: the terms are ORed, a term's expressions ANDed,
  an empty term matches nothing; In, NotIn, Exists, DoesNotExist, Gt, Lt; NotIn and DoesNotExist hold
  on a node without the label (same page, "Node affinity"; NodeSelectorRequirement in the API).
- Taints: NoSchedule and NoExecute taints must each be tolerated; PreferNoSchedule only steers. A
  toleration matches on key (an empty key with Exists matches every key), on value for Equal (the
  default operator), and on effect (empty matches every effect)
  (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/).

A label that every node of the pool has but whose value differs per node (zone, host name) is
taken to satisfy In/NotIn/Gt/Lt and nodeSelector entries on it: the answer then depends on the node, and
`Verdict.assumed` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_plan.helm.pods import PodSummary
from offline_plan.helm.pools import Pool, Taint

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass
class Verdict:
    pool: Pool
    fits: bool
    why_not: str = ""
    assumed: list[str] = field(default_factory=list)


def tolerates(toleration: dict[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.key:
        return False
    return operator == "Exists" or str(toleration.get("value") or "") == taint.value


def _expression(expr: dict[str, Any], pool: Pool, assumed: list[str]) -> bool:
    key = str(expr.get("key"))
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if key in pool.varying:  # present on every node, its value known only per node
        if op in ("In", "NotIn", "Gt", "Lt"):
            assumed.append(f"{key} {op} {','.join(values)}")
            return True
        return op == "Exists"
    present = key in pool.labels
    value = pool.labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            number, bound = int(str(value)), int(values[0])
        except ValueError:
            return False
        return number > bound if op == "Gt" else number < bound
    return False


def _shown(expr: dict[str, Any]) -> str:
    values = [str(v) for v in expr.get("values") or []]
    shown = ",".join(values) if len(values) <= 3 else f"{','.join(values[:2])},... ({len(values)} values)"
    return f"`{' '.join(str(p) for p in (expr.get('key'), expr.get('operator'), shown) if p)}`"


def verdict(pod: PodSummary, pool: Pool) -> Verdict:
    assumed: list[str] = []
    for key, value in sorted(pod.node_selector.items()):
        if key in pool.varying:
            assumed.append(f"{key}={value}")
        elif pool.labels.get(key) != str(value):
            return Verdict(pool, False, f"nodeSelector `{key}={value}`: its nodes do not carry it")
    if pod.required_terms is not None:
        matched = False
        failed = ""
        for term in pod.required_terms:
            exprs = [e for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
            if not exprs and not term.get("matchFields"):
                continue  # an empty term matches no node
            miss = next((e for e in exprs if not _expression(e, pool, assumed)), None)
            if miss is None:
                matched = True
                break
            failed = failed or _shown(miss)
        if not matched:
            return Verdict(pool, False, f"required node affinity {failed or '(no term)'} does not hold")
    for taint in pool.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in pod.tolerations):
            return Verdict(pool, False, f"taint `{taint}` not tolerated")
    return Verdict(pool, True, assumed=assumed)


def verdicts(pod: PodSummary, found: list[Pool]) -> list[Verdict]:
    return [verdict(pod, pool) for pool in found]


def schedulable_pools(pod: PodSummary, found: list[Pool]) -> list[Pool]:
    return [v.pool for v in verdicts(pod, found) if v.fits]
