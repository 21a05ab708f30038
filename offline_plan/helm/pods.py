"""What the pods of a rendered release ask of the nodes: images, requests, placement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_plan.helm import pod_security, quantities
from policies.workloads import ContainerView, workload

HOSTNAME_LABEL = "kubernetes.io/hostname"
# The device plugin's resource name (contract.GPU_TAINT_KEY is the same string, for the taint).
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass
class PodSummary:
    ref: str
    """`Kind/name` of the workload."""
    namespace: str | None
    count: str
    """Replicas, `per node` for a DaemonSet, `run once` for a Job."""
    replicas: float
    cpu: float
    memory: float
    node_selector: dict[str, Any]
    tolerations: list[dict[str, Any]]
    affinity_keys: list[str]
    images: list[str] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)
    """Containers without a CPU or memory request."""
    level: str = pod_security.RESTRICTED
    """The Pod Security level the pod meets; `level_gaps` what keeps it from the next stricter one."""
    level_gaps: list[str] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)
    """The pod template's labels."""
    required_terms: list[dict[str, Any]] | None = None
    """The required node affinity's nodeSelectorTerms; None when the pod has none."""
    spread_by_host: bool = False
    """A required pod anti-affinity on kubernetes.io/hostname that selects the pod's own labels:
    no two of its replicas share a node."""
    gpus: float = 0.0
    """nvidia.com/gpu the pod asks for (an extended resource's limit is its request)."""


def _pod_requests(spec: dict[str, Any], unset: list[str]) -> tuple[float, float]:
    """The pod's effective request: the larger of its running containers' sum and its largest
    init container (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers);
    native sidecars (restartPolicy Always) count with the running ones."""
    running = [0.0, 0.0]
    init_peak = [0.0, 0.0]
    sections = [("containers", c) for c in spec.get("containers") or []]
    sections += [("initContainers", c) for c in spec.get("initContainers") or []]
    for section, container in sections:
        requests = (container.get("resources") or {}).get("requests") or {}
        values = [quantities.parse(requests.get("cpu")), quantities.parse(requests.get("memory"))]
        if section == "containers" and None in values:
            unset.append(str(container.get("name")))
        if section == "containers" or container.get("restartPolicy") == "Always":
            running = [r + (v or 0.0) for r, v in zip(running, values, strict=True)]
        else:
            init_peak = [max(p, v or 0.0) for p, v in zip(init_peak, values, strict=True)]
    return max(running[0], init_peak[0]), max(running[1], init_peak[1])


def _affinity_keys(spec: dict[str, Any]) -> list[str]:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    keys = []
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            values = [str(v) for v in expr.get("values") or []]
            # A long instance-type list (the EFA plugin's) is summarised: its length says enough.
            shown = ",".join(values) if len(values) <= 4 else f"{','.join(values[:3])},... ({len(values)} values)"
            keys.append(f"{expr.get('key')} {expr.get('operator')} {shown}".rstrip())
    return keys


def _required_terms(spec: dict[str, Any]) -> list[dict[str, Any]] | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not isinstance(required, dict):
        return None
    return [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]


def _selects(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """A labelSelector's matchLabels and matchExpressions against labels
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        present = key in labels
        if (op == "In" and (not present or str(labels[key]) not in values)) or (
            op == "NotIn" and present and str(labels[key]) in values
        ):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _spread_by_host(spec: dict[str, Any], labels: dict[str, Any]) -> bool:
    terms = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    return any(
        isinstance(t, dict)
        and t.get("topologyKey") == HOSTNAME_LABEL
        and isinstance(t.get("labelSelector"), dict)
        and _selects(t["labelSelector"], labels)
        for t in terms
    )


def _gpus(containers: list[ContainerView]) -> float:
    """Over the running containers, the KServe model container included (policies/workloads.py)."""
    total = 0.0
    for view in containers:
        if not view.runs_alongside:
            continue
        resources = view.container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE))
        total += quantities.parse(value) or 0.0
    return total


def summaries(objects: list[dict[str, Any]]) -> list[PodSummary]:
    found = []
    for obj in objects:
        w = workload(obj)
        if w is None or not w.pods:
            continue
        for pod in w.pods:
            unset: list[str] = []
            cpu, memory = _pod_requests(pod.spec, unset)
            if w.kind == "DaemonSet":
                count, replicas = "per node", 1.0
            elif not w.long_running:
                count, replicas = "run once", 1.0
            else:
                replicas = w.replicas if w.replicas is not None else 1.0
                count = f"{replicas:g}"
            level, gaps = pod_security.level(pod.spec)
            found.append(
                PodSummary(
                    ref=w.ref,
                    namespace=w.namespace,
                    level=level,
                    level_gaps=gaps,
                    count=count,
                    replicas=replicas,
                    cpu=cpu,
                    memory=memory,
                    node_selector=dict(pod.spec.get("nodeSelector") or {}),
                    tolerations=list(pod.spec.get("tolerations") or []),
                    affinity_keys=_affinity_keys(pod.spec),
                    images=[str(c.container.get("image")) for c in pod.containers if c.container.get("image")],
                    unset=unset,
                    labels=dict(pod.labels),
                    required_terms=_required_terms(pod.spec),
                    spread_by_host=_spread_by_host(pod.spec, pod.labels),
                    gpus=_gpus(pod.containers),
                )
            )
    return found


def custom_resource_images(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(object, image) for images an operator pulls for a custom resource the chart renders: a
    `spec.image` string (Prometheus, Alertmanager) or the GPU Operator's operand style
    (`repository`, `image`, `version` side by side; components/operators/values.py)."""
    found: list[tuple[str, str]] = []
    for obj in objects:
        if workload(obj) is not None:
            continue
        ref = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("image"), str):
            found.append((ref, spec["image"]))
        for value in spec.values():
            if (
                isinstance(value, dict)
                and value.get("enabled") is not False
                and all(isinstance(value.get(k), str) for k in ("repository", "image", "version"))
            ):
                sep = "@" if value["version"].startswith("sha256:") else ":"
                found.append((ref, f"{value['repository']}/{value['image']}{sep}{value['version']}"))
    return found
