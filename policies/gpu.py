"""What makes a container a GPU container, and whether a pod tolerates a taint.

Kept apart from the rules because three rules (gpu-in-limits, gpu-taint-tolerated and the stack
rule) and the probe rules all need the same answer.
"""

from __future__ import annotations

from common.contract import GPU_RESOURCE, GPU_TAINT_EFFECT, GPU_TAINT_KEY
from policies.objects import as_dict, as_list, as_str, is_unknown
from policies.workloads import ContainerView, PodView


def is_gpu_resource(key: str) -> bool:
    """Extended resources that stand for an accelerator: NVIDIA (whole GPUs and MIG slices), AMD,
    Intel. Device-plugin names: nvidia.com/gpu, nvidia.com/mig-1g.10gb, amd.com/gpu, gpu.intel.com/i915."""
    return key == GPU_RESOURCE or key.endswith("/gpu") or key.startswith(("nvidia.com/mig-", "gpu.intel.com/"))


def gpu_keys(container: dict) -> set[str]:
    resources = as_dict(container.get("resources"))
    keys = set()
    for part in ("limits", "requests"):
        for k in as_dict(resources.get(part)):
            if isinstance(k, str) and is_gpu_resource(k):
                keys.add(k)
    return keys


def is_gpu_container(view: ContainerView) -> bool:
    return bool(gpu_keys(view.container))


def pod_uses_gpus(pod: PodView) -> bool:
    return any(is_gpu_container(c) for c in pod.containers)


def tolerates(toleration: dict, key: str, effect: str, value: str | None = None) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration docs): an empty key with operator Exists
    matches every taint; Exists ignores the value; Equal (the default) compares it; an empty effect
    matches every effect. `value=None` means "any value" (the taint's value is not known here)."""
    t_key = toleration.get("key")
    op = toleration.get("operator") or "Equal"
    t_effect = toleration.get("effect") or ""
    if any(is_unknown(v) for v in (t_key, op, t_effect, toleration.get("value"))):
        return True  # known only after preview; do not accuse
    if t_effect and t_effect != effect:
        return False
    if not t_key:
        return op == "Exists"
    if t_key != key:
        return False
    if op == "Exists" or value is None:
        return True
    return (as_str(toleration.get("value")) or "") == value


def pod_tolerates(
    pod: PodView, key: str = GPU_TAINT_KEY, effect: str = GPU_TAINT_EFFECT, value: str | None = None
) -> bool:
    if is_unknown(pod.spec.get("tolerations")):
        return True
    return any(tolerates(t, key, effect, value) for t in as_list(pod.spec.get("tolerations")) if isinstance(t, dict))
