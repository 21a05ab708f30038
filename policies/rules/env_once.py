"""env-set-once: a container names each environment variable once.

Kubernetes accepts a container whose `env` lists the same name twice and the kubelet keeps the
last entry (kubernetes/kubernetes v1.33.0, pkg/kubelet/kubelet_pods.go makeEnvironmentVariables
fills a map in list order); the API server only warns "hides previous definition of ..., which may
be dropped when using apply" (pkg/api/pod/warnings.go). A reviewer, a diff or a rule that reads the
first entry sees a safe value (HF_HUB_OFFLINE: "1", a secretKeyRef) while the pod runs the second.
Server-side apply merges `env` by name, so the duplicate may also vanish on the next apply. The
rule refuses the duplicate itself rather than guessing which entry a reader meant.
"""

from __future__ import annotations

from policies.objects import Finding, as_dict, as_list, as_str
from policies.workloads import workload


def env_set_once(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            seen: set[str] = set()
            twice: list[str] = []
            for e in as_list(c.container.get("env")):
                name = as_str(as_dict(e).get("name"))
                if name is None:
                    continue
                if name in seen and name not in twice:
                    twice.append(name)
                seen.add(name)
            if twice:
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} sets env {', '.join(twice)} more than once; Kubernetes keeps the last "
                        "entry, so an earlier value hides the one the container really gets; keep one entry per name.",
                        c.name,
                    )
                )
    return out
