"""The entrance and LoRA adapters: pools that reach their servers, pickers that survive a drain,
adapters that are the reviewed bytes.

inference-pool-selects-its-servers (stack rule): an InferencePool (an object, or the one a release
of the endpoint picker chart renders from `router.modelServers`) selects at least one long-running
server pod in its namespace, and every pod it selects declares each of its target ports. A pool
whose selector matches nothing, or a port nothing listens on, turns every request for that model
into an error at the Gateway while every object looks healthy.

picker-highly-available (stack rule): every endpoint picker (a picker chart release's
`router.epp.replicas`, or a rendered Deployment carrying the picker's pod label) runs more than one
replica, and a PodDisruptionBudget in its namespace selects its pods. With one picker, its restart
or a node drain leaves the pool without scheduling (the InferencePool's failureMode then decides
between plain balancing and errors).

adapter-revision-pinned: every LoRA adapter a vLLM container loads (`--lora-modules name=path` or
the JSON form) is a local folder whose last component is a 40-hex commit (a mirrored, verified copy
of a pinned revision), never a Hub repo id, which vLLM would download from the moving default
branch; and no container lets adapters be loaded at run time (VLLM_ALLOW_RUNTIME_LORA_UPDATING),
which would bypass the pin altogether.

Chart facts (which label marks a picker pod, the release name -> picker name rule) come from
common/contract.py, shared with the component that installs the chart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from common.contract import PICKER_CHART, PICKER_POD_LABEL, SERVER_PORT, picker_name
from policies.commands import literal_env, normalise_flag, tokens
from policies.objects import Finding, as_dict, as_list, as_number, as_str, is_commit, is_unknown
from policies.resource import Resource
from policies.rules.stack import _same_namespace, selector_matches
from policies.workloads import PodView, workload

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# Chart defaults of llm-d-router-gateway v0.10.0 (routerlib values.yaml: epp.replicas 1 at line 7,
# modelServers.targetPorts [8000] at lines 165-166).
CHART_DEFAULT_REPLICAS = 1
CHART_DEFAULT_PORTS = (SERVER_PORT,)
RUNTIME_LORA_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"


@dataclass
class Pool:
    owner: Resource
    what: str
    namespace: str | None
    selector: dict
    ports: list[float | None]  # None: not known yet (preview)


def _is_picker_release(r: Resource) -> bool:
    return r.type == HELM_RELEASE and (as_str(r.props.get("chart")) or "").rstrip("/").endswith(PICKER_CHART)


def _release_name(r: Resource) -> str:
    return as_str(r.props.get("name")) or r.name


def pools(resources: list[Resource]) -> list[Pool]:
    found = []
    for r in resources:
        if r.is_kubernetes and r.kind == "InferencePool":
            spec = as_dict(r.props.get("spec"))
            found.append(
                Pool(
                    r,
                    f"InferencePool/{r.name}",
                    r.namespace,
                    as_dict(as_dict(spec.get("selector")).get("matchLabels")),
                    [as_number(as_dict(p).get("number")) for p in as_list(spec.get("targetPorts"))],
                )
            )
        elif _is_picker_release(r):
            router = as_dict(as_dict(r.props.get("values")).get("router"))
            if as_dict(router.get("inferencePool")).get("create") is False:
                continue  # standalone mode: no pool
            servers = as_dict(router.get("modelServers"))
            ports = [as_number(as_dict(p).get("number")) for p in as_list(servers.get("targetPorts"))]
            namespace = r.props.get("namespace")
            found.append(
                Pool(
                    r,
                    f"the InferencePool of release {_release_name(r)}",
                    namespace if is_unknown(namespace) else as_str(namespace),
                    as_dict(servers.get("matchLabels")),
                    ports or list(CHART_DEFAULT_PORTS),
                )
            )
    return found


def _declared_ports(pod: PodView) -> set[float] | None:
    """The container ports the pod declares; None while one of them is not known (preview)."""
    ports = {
        as_number(as_dict(p).get("containerPort")) for c in pod.containers for p in as_list(c.container.get("ports"))
    }
    return None if None in ports else {p for p in ports if p is not None}


def inference_pool_selects_its_servers(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    candidates = [(r, workload(r.props)) for r in resources if r.is_kubernetes]
    workloads = [(r, w) for r, w in candidates if w is not None and w.long_running]
    out = []
    for pool in pools(resources):
        if any(is_unknown(v) for v in pool.selector.values()) or any(p is None for p in pool.ports):
            continue  # preview: not known yet
        if not pool.selector:
            out.append(
                (
                    pool.owner,
                    Finding(
                        f"{pool.what}: its selector is empty, and an InferencePool must name the labels of its "
                        f"server pods (1 to 64 matchLabels); set them to the servers' pod template labels."
                    ),
                )
            )
            continue
        selected = [
            (w, pod)
            for _, w in workloads
            for pod in w.pods
            if _same_namespace(pool.namespace, w.namespace)
            and selector_matches({"matchLabels": pool.selector}, pod.labels)
        ]
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(pool.selector.items()))
        if not selected:
            out.append(
                (
                    pool.owner,
                    Finding(
                        f"{pool.what}: its selector ({wanted}) matches no server pod in namespace "
                        f"'{pool.namespace or 'default'}', so every request for it fails at the Gateway; make the "
                        f"selector equal to the server pods' labels."
                    ),
                )
            )
            continue
        for w, pod in selected:
            declared = _declared_ports(pod)
            if declared is None:
                continue  # preview: not known yet
            missing = [p for p in pool.ports if p not in declared]
            if missing:
                out.append(
                    (
                        pool.owner,
                        Finding(
                            f"{pool.what}: it sends to port {', '.join(f'{p:g}' for p in missing)} of {w.ref} "
                            f"({pod.where}), whose containers declare no such port; set the pool's target port to the "
                            f"server's port ({', '.join(f'{p:g}' for p in sorted(declared)) or 'none declared'})."
                        ),
                    )
                )
    return out


@dataclass
class Picker:
    owner: Resource
    what: str
    namespace: str | None
    replicas: float | None
    pod_labels: dict


def pickers(resources: list[Resource]) -> list[Picker]:
    found = []
    for r in resources:
        if _is_picker_release(r):
            router = as_dict(as_dict(r.props.get("values")).get("router"))
            replicas = as_dict(router.get("epp")).get("replicas", CHART_DEFAULT_REPLICAS)
            name = _release_name(r)
            namespace = r.props.get("namespace")
            found.append(
                Picker(
                    r,
                    f"the endpoint picker of release {name}",
                    namespace if is_unknown(namespace) else as_str(namespace),
                    None if is_unknown(replicas) else as_number(replicas),
                    {PICKER_POD_LABEL: picker_name(name)},
                )
            )
        elif r.is_kubernetes and r.kind == "Deployment":
            w = workload(r.props)
            if w is None or not w.pods or PICKER_POD_LABEL not in w.pods[0].labels:
                continue
            found.append(
                Picker(
                    r,
                    f"{w.ref} (an endpoint picker)",
                    w.namespace,
                    w.replicas,
                    {PICKER_POD_LABEL: w.pods[0].labels[PICKER_POD_LABEL]},
                )
            )
    return found


def picker_highly_available(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    pdbs = [r for r in resources if r.is_kubernetes and r.kind == "PodDisruptionBudget"]
    out = []
    for p in pickers(resources):
        if p.replicas is not None and p.replicas <= 1:
            out.append(
                (
                    p.owner,
                    Finding(
                        f"{p.what}: runs {p.replicas:g} replica, so its restart or a node drain leaves the pool "
                        f"without a picker; run at least 2 (router.epp.replicas; leader election keeps one active)."
                    ),
                )
            )
        covered = any(
            _same_namespace(b.namespace, p.namespace)
            and isinstance(as_dict(b.props.get("spec")).get("selector"), dict)
            and selector_matches(as_dict(b.props["spec"]["selector"]), p.pod_labels)
            for b in pdbs
        )
        if not covered:
            labels = ", ".join(f"{k}={v}" for k, v in p.pod_labels.items())
            out.append(
                (
                    p.owner,
                    Finding(
                        f"{p.what}: no PodDisruptionBudget in namespace '{p.namespace or 'default'}' selects its pods "
                        f"({labels}), so a drain may evict every picker at once; add one with maxUnavailable: 1 and "
                        f"that selector."
                    ),
                )
            )
    return out


def _lora_module_paths(value: str) -> list[tuple[str, str]]:
    """(name, path) of one --lora-modules item: `name=path` or a JSON object with name and path."""
    text = value.strip()
    if text.startswith("{"):
        try:
            item = json.loads(text)
        except ValueError:
            return [("?", text)]
        return [(str(item.get("name", "?")), str(item.get("path", "")))]
    name, _, path = text.partition("=")
    return [(name, path)]


def _raw_items(container: dict) -> list[str]:
    """command + args as written: a JSON --lora-modules item has spaces that must not be split."""
    return [
        normalise_flag(str(i))
        for part in ("command", "args")
        for i in as_list(container.get(part))
        if isinstance(i, str)
    ]


def _lora_items(toks: list[str]) -> list[str]:
    """Every value given to --lora-modules (it takes several, up to the next flag)."""
    items: list[str] = []
    for i, t in enumerate(toks):
        if t.startswith("--lora-modules="):
            items.append(t.split("=", 1)[1])
        elif t == "--lora-modules":
            for nxt in toks[i + 1 :]:
                if nxt.startswith("--"):
                    break
                items.append(nxt)
    return items


def adapter_path_problem(name: str, path: str) -> str | None:
    if not path:
        return f"loads adapter '{name}' without a path"
    if not path.startswith("/"):
        return (
            f"loads adapter '{name}' from '{path}', a Hub repo id (or a relative path) that vLLM resolves by "
            f"downloading the repo's default branch"
        )
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if not is_commit(last):
        return (
            f"loads adapter '{name}' from '{path}', which does not end in the 40-hex commit it was mirrored "
            f"from, so nothing ties it to a reviewed revision"
        )
    return None


def adapter_revision_pinned(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            # The items as written (JSON objects keep their spaces); a flag inside a shell script is
            # found in its tokens instead.
            items = _lora_items(_raw_items(c.container)) or _lora_items(tokens(c.container))
            for item in items:
                for name, path in _lora_module_paths(item):
                    problem = adapter_path_problem(name, path)
                    if problem:
                        out.append(
                            Finding(
                                f"{w.ref}: {c.label} {problem}; mirror the adapter at a pinned commit "
                                f"and pass its folder <mount>/<org>/<name>/<40-hex commit>.",
                                c.name,
                            )
                        )
            if (literal_env(c.container).get(RUNTIME_LORA_ENV) or "").strip().lower() in ("1", "true"):
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} sets {RUNTIME_LORA_ENV}, which lets any client load an "
                        f"adapter of its choice at run time; remove it and list pinned adapters in "
                        f"--lora-modules.",
                        c.name,
                    )
                )
    return out
