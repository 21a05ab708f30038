"""resources-declared, gpu-in-limits and shm-size-limited: what a container asks of its node.

resources-declared matches the Gatekeeper library's K8sRequiredResources with
`limits: [memory], requests: [cpu, memory]` (and `limits: [cpu, memory]` with requireCpuLimit) and
Kyverno's require-requests-limits: requests are required explicitly even though Kubernetes copies
limits into missing requests, because every community gate does and the copy hides intent.
Ephemeral containers are skipped: the API forbids resources on them.
"""

from __future__ import annotations

from policies.gpu import gpu_keys
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown, present
from policies.workloads import ContainerView, workload

SHM_PATH = "/dev/shm"


def resources_declared(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    need = [("requests", "cpu"), ("requests", "memory"), ("limits", "memory")]
    if config.get("requireCpuLimit", False):
        need.append(("limits", "cpu"))
    out = []
    for pod in w.pods:
        for c in pod.containers:
            if c.section == "ephemeralContainers":
                continue
            resources = c.container.get("resources")
            if is_unknown(resources):
                continue
            resources = as_dict(resources)
            missing = [f"{part}.{res}" for part, res in need if not present(as_dict(resources.get(part)).get(res))]
            if missing:
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} does not declare {', '.join('resources.' + m for m in missing)}; "
                        f"set them so the scheduler reserves what the container needs and a leak is "
                        f"OOM-killed instead of starving its neighbours.",
                        c.name,
                    )
                )
    return out


def _same_quantity(a, b) -> bool:
    # The engine sends numbers as doubles (1 -> 1.0) while YAML users write "1" or 1.
    try:
        return float(str(a).strip()) == float(str(b).strip())
    except ValueError:
        return str(a).strip() == str(b).strip()


def gpu_in_limits(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            resources = as_dict(c.container.get("resources"))
            limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
            for key in sorted(gpu_keys(c.container)):
                if key not in limits:
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} asks for '{key}' only in resources.requests; extended "
                            f"resources such as GPUs must be set in resources.limits (requests may be omitted "
                            f"or must equal the limit), so move it to limits.",
                            c.name,
                        )
                    )
                elif (
                    key in requests
                    and not (is_unknown(requests[key]) or is_unknown(limits[key]))
                    and not _same_quantity(requests[key], limits[key])
                ):
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} requests {requests[key]} '{key}' but limits it to {limits[key]}; "
                            f"GPUs cannot be overcommitted, so make the request equal the limit or drop it.",
                            c.name,
                        )
                    )
    return out


def shm_size_limited(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        shm_volumes: dict[str, list[ContainerView]] = {}
        for c in pod.containers:
            for m in as_list(c.container.get("volumeMounts")):
                m = as_dict(m)
                if (as_str(m.get("mountPath")) or "").rstrip("/") == SHM_PATH and as_str(m.get("name")):
                    shm_volumes.setdefault(m["name"], []).append(c)
        for v in as_list(pod.spec.get("volumes")):
            v = as_dict(v)
            name = as_str(v.get("name"))
            empty_dir = v.get("emptyDir")
            if name not in shm_volumes or not isinstance(empty_dir, dict) or empty_dir.get("medium") != "Memory":
                continue
            if not present(empty_dir.get("sizeLimit")):
                users = shm_volumes[name]
                who = ", ".join(c.label for c in users)
                out.append(
                    Finding(
                        f"{w.ref}: volume '{name}' is a memory-backed emptyDir mounted at {SHM_PATH} by {who} "
                        f"without a sizeLimit; set emptyDir.sizeLimit (e.g. '16Gi') so shared memory cannot "
                        f"grow until the node runs out of RAM.",
                        users[0].name,
                    )
                )
    return out
