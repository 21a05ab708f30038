"""no-secrets-in-config-maps (stack rule): a credential that reaches a container through a ConfigMap.

`envFrom: [{configMapRef: {name: X}}]` turns every key of ConfigMap X into an env var of the
container (with the optional `prefix`), and `env[].valueFrom.configMapKeyRef` one key; a volume
of ConfigMap X (or a projected volume's configMap source) puts its keys in files. A ConfigMap is
not a Secret: any principal that may read ConfigMaps reads it, and it is printed whole by
`kubectl get -o yaml`, kept in Pulumi state and written into plan files
(https://kubernetes.io/docs/concepts/configuration/configmap/: "ConfigMap does not provide secrecy
or encryption. If the data you want to store are confidential, use a Secret"). The
per-container rule no-literal-secrets cannot see it, since the value lives in another object; this
rule joins the two when the ConfigMap is among the checked objects (same namespace), and flags a
key whose env-var name marks a credential (as no-literal-secrets judges names) or whose value
looks like a token (common/untrusted.py secret_kind). A ConfigMap that is not among the objects
(created by hand, by an operator) cannot be judged here.
"""

from __future__ import annotations

from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.secrets import is_secret_name, looks_like_token
from policies.workloads import PodView, workload


def _config_maps(resources: list[Resource]) -> dict[tuple[str | None, str], dict[str, str]]:
    """(namespace, name) -> the string data of every ConfigMap among the resources."""
    found: dict[tuple[str | None, str], dict[str, str]] = {}
    for r in resources:
        if not r.is_kubernetes or r.kind != "ConfigMap" or is_unknown(r.namespace):
            continue
        name = as_str(as_dict(r.props.get("metadata")).get("name"))
        data = r.props.get("data")
        if name and isinstance(data, dict):
            found[(r.namespace, name)] = {str(k): v for k, v in data.items() if isinstance(v, str)}
    return found


def _lookup(maps: dict, namespace: str | None, name: object) -> dict[str, str] | None:
    """The ConfigMap `name` in the workload's namespace; a file without namespaces matches either way."""
    if not isinstance(name, str):
        return None
    if (namespace, name) in maps:
        return maps[(namespace, name)]
    if namespace is None:
        candidates = [data for (_, n), data in maps.items() if n == name]
        return candidates[0] if len(candidates) == 1 else None
    return maps.get((None, name))


def _volume_maps(pod: PodView) -> list[str]:
    names = []
    for v in as_list(pod.spec.get("volumes")):
        v = as_dict(v)
        names.append(as_dict(v.get("configMap")).get("name"))
        for source in as_list(as_dict(v.get("projected")).get("sources")):
            names.append(as_dict(as_dict(source).get("configMap")).get("name"))
    return [n for n in names if isinstance(n, str)]


def _finding(ref: str, what: str, config_map: str, container: str | None) -> Finding:
    return Finding(
        f"{ref}: {what} from ConfigMap '{config_map}', which holds a credential in plain text; move it to a Secret "
        "and read it with secretKeyRef (or envFrom secretRef).",
        container,
    )


def _secret_keys(data: dict[str, str] | None, prefix: str) -> list[str]:
    """The env names an envFrom of `data` would set that carry a credential (by name or by value)."""
    return sorted(
        prefix + k for k, v in (data or {}).items() if v and (is_secret_name(prefix + k) or looks_like_token(v))
    )


def no_secrets_in_config_maps(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    maps = _config_maps(resources)
    if not maps:
        return []
    out: list[tuple[Resource, Finding]] = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None or is_unknown(w.namespace):
            continue
        namespace = w.namespace
        for pod in w.pods:
            for c in pod.containers:
                for source in as_list(c.container.get("envFrom")):
                    ref = as_dict(as_dict(source).get("configMapRef"))
                    data = _lookup(maps, namespace, ref.get("name"))
                    prefix = as_str(as_dict(source).get("prefix")) or ""
                    bad = _secret_keys(data, prefix)
                    if bad:
                        out.append(
                            (
                                r,
                                _finding(
                                    w.ref,
                                    f"{c.label} gets env {', '.join(bad)} through envFrom",
                                    str(ref.get("name")),
                                    c.name,
                                ),
                            )
                        )
                for e in as_list(c.container.get("env")):
                    e = as_dict(e)
                    ref = as_dict(as_dict(e.get("valueFrom")).get("configMapKeyRef"))
                    data = _lookup(maps, namespace, ref.get("name"))
                    value = (data or {}).get(str(ref.get("key")))
                    env_name = as_str(e.get("name")) or "?"
                    if value and (is_secret_name(env_name) or looks_like_token(value)):
                        what = f"{c.label} reads env {env_name} (key '{ref.get('key')}')"
                        out.append((r, _finding(w.ref, what, str(ref.get("name")), c.name)))
            for cm in dict.fromkeys(_volume_maps(pod)):
                data = _lookup(maps, namespace, cm)
                bad = sorted(k for k, v in (data or {}).items() if looks_like_token(v))
                if bad:
                    what = f"{pod.where} mounts token-like keys {', '.join(bad)} as files"
                    out.append((r, _finding(w.ref, what, cm, None)))
    return out
