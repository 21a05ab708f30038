"""namespace-pod-security-version (stack rule): the Pod Security level is enforced as it stands now.

`pod-security.kubernetes.io/enforce-version: v1.N` makes Pod Security Admission check the level
as it was defined in Kubernetes 1.N (https://kubernetes.io/docs/concepts/security/pod-security-admission/,
"Pod Security Admission labels for namespaces"). The levels grow stricter over releases, so an old
pin admits what the same level refuses today: restricted pinned below v1.22 does not require
dropping ALL capabilities, below v1.23 allows runAsUser 0, below v1.19 needs no seccomp profile;
baseline pinned below v1.34 lets probes and lifecycle hooks name any `host`
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, each control's "(v1.N+)").
A pinned version is a fair choice (an upgrade of the checks becomes a decision, not a surprise; the
program pins its cluster's own minor version, common/pod_security.py psa_version), so `latest`
passes and so does a pin at or above the floor: the rule's
`minimumVersion` setting (default PSA_VERSION) and the Kubernetes version of every EKS cluster
(`version`) and GKE cluster (`minMasterVersion`) among the resources, since a pin older than the
cluster it runs on gives up the checks that cluster already has. A value that is neither `latest`
nor `v1.N` is refused too; what PSA does with it is unresolved here (settle it with
`kubectl label ns x pod-security.kubernetes.io/enforce-version=foo --dry-run=server` on a cluster).
"""

from __future__ import annotations

import re

from common import pod_security as ps
from policies.objects import Finding, as_dict, as_str, is_unknown
from policies.resource import Resource
from policies.rules.network import EKS_CLUSTER, GKE_CLUSTER

VERSION_LABEL = f"{ps.PSA_PREFIX}/enforce-version"
_PSA_VERSION_RE = re.compile(r"^v1\.(\d+)$")
# EKS `version` ("1.33"), GKE `minMasterVersion` ("1.33" or "1.33.2-gke.1200000").
_CLUSTER_VERSION_RE = re.compile(r"^v?1\.(\d+)(?:[.-]|$)")
VERSION_PATTERN = r"^v1\.\d+$"


def _cluster_minors(resources: list[Resource]) -> list[tuple[int, str]]:
    found = []
    for r in resources:
        key = {EKS_CLUSTER: "version", GKE_CLUSTER: "minMasterVersion"}.get(r.type)
        value = as_str(r.props.get(key)) if key else None
        m = _CLUSTER_VERSION_RE.match(value or "")
        if m:
            found.append((int(m.group(1)), f"cluster '{r.name}' runs Kubernetes {value}"))
    return found


def namespace_pod_security_version(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    minimum = _PSA_VERSION_RE.match(str(config.get("minimumVersion", ps.PSA_VERSION)))
    floors = _cluster_minors(resources)
    if minimum:
        floors.append((int(minimum.group(1)), f"the pack's minimumVersion is {config.get('minimumVersion')}"))
    out = []
    for r in resources:
        if not r.is_kubernetes or r.kind != "Namespace":
            continue
        labels = as_dict(r.props.get("metadata")).get("labels")
        value = None if is_unknown(labels) else as_dict(labels).get(VERSION_LABEL)
        if value is None or is_unknown(value) or value == "latest":
            continue
        name = as_str(as_dict(r.props.get("metadata")).get("name")) or r.name
        m = _PSA_VERSION_RE.match(str(value))
        if not m:
            out.append(
                (
                    r,
                    Finding(
                        f"Namespace/{name}: {VERSION_LABEL} is {value!r}, not 'latest' or a version 'v1.N'; set it "
                        "to the cluster's minor version (or 'latest')."
                    ),
                )
            )
            continue
        pinned = int(m.group(1))
        below = [why for minor, why in floors if pinned < minor]
        if below:
            out.append(
                (
                    r,
                    Finding(
                        f"Namespace/{name}: {VERSION_LABEL} pins {value}, older than {'; '.join(below)}, so Pod "
                        "Security Admission enforces the level as it was then and admits pods it refuses today; pin "
                        "the cluster's minor version (or 'latest')."
                    ),
                )
            )
    return out
