"""Environment rule: a GKE cluster the program creates is reachable from where `pulumi up` runs.

The Kubernetes provider of the stack talks to the server its kubeconfig names. A GitHub-hosted
runner is on the public internet with addresses GitHub does not fix for a repository, so it reaches
a created GKE cluster only:
- through the DNS-based control-plane endpoint with user traffic allowed
  (`controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic`, pulumi-gcp 10.2.0): a
  name of the form `<uid>.<region>.gke.goog`, "accessible from the public internet", where IAM
  (`container.clusters.connect`) authorizes the caller and authorized networks do not apply
  (GKE API reference, ControlPlaneEndpointsConfig.DNSEndpointConfig.endpoint; GKE docs, "About
  network isolation", DNS-based endpoint); or
- through a public IP endpoint open to every address. A private IP endpoint
  (`privateClusterConfig.enablePrivateEndpoint`) answers only inside the VPC, and authorized
  networks admit only the listed ranges, which a GitHub-hosted runner's address is not known to
  be in.
The rule reads the recorded cluster inputs and the kubeconfig the program hands the provider; on a
self-hosted or CodeBuild runner (inside the network) it does not apply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlparse

from offline_plan import credentials
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

NAME = "gke-deployer-reaches-the-api"
GKE_DNS_SUFFIX = ".gke.goog"


def _server_and_ca(graph: ApplyGraph) -> tuple[str, bool] | None:
    providers = [r for r in graph.of_type("pulumi:providers:kubernetes") if isinstance(r.inputs.get("kubeconfig"), str)]
    for provider in providers:
        try:
            doc = json.loads(provider.inputs["kubeconfig"])
        except ValueError:
            continue
        cluster = doc["clusters"][0]["cluster"]
        return str(cluster.get("server", "")), "certificate-authority-data" in cluster
    return None


def gke_reach_violations(graph: ApplyGraph) -> list[Violation]:
    if not graph.evaluation.config:
        return []
    settings = credentials.stack_settings(graph.evaluation)
    if settings.deployer.runner != "github-hosted":
        return []
    out = []
    for cluster in graph.of_type("gcp:container/cluster:Cluster"):
        inputs = cluster.inputs
        dns_open = bool(
            ((inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig") or {}).get(
                "allowExternalTraffic"
            )
        )
        private_ip = bool((inputs.get("privateClusterConfig") or {}).get("enablePrivateEndpoint"))
        ip_open = not private_ip and inputs.get("masterAuthorizedNetworksConfig") is None
        found = _server_and_ca(graph)
        if found is None:
            continue
        server, has_ca = found
        via_dns = urlparse(server).hostname is not None and str(urlparse(server).hostname).endswith(GKE_DNS_SUFFIX)
        if via_dns and not dns_open:
            out.append(
                Violation(
                    NAME,
                    describe(cluster),
                    "the provider connects through the DNS-based endpoint, but it takes no user traffic "
                    "(dnsEndpointConfig.allowExternalTraffic false)",
                )
            )
        if via_dns and has_ca:
            out.append(
                Violation(
                    NAME,
                    describe(cluster),
                    "the kubeconfig pins the cluster CA for the DNS-based endpoint, whose certificate the "
                    "system's roots verify (gcloud writes no CA for it)",
                )
            )
        if not via_dns and not ip_open:
            why = "private (enablePrivateEndpoint)" if private_ip else "limited to authorized networks"
            out.append(
                Violation(
                    NAME,
                    describe(cluster),
                    f"the IP endpoint is {why} and the provider connects to {server} from a GitHub-hosted "
                    "runner, which only the DNS-based endpoint admits: keep "
                    "security.clusterEndpoint.dnsEndpoint on, or deploy from inside the VPC (deployer.runner)",
                )
            )
    return out


@rule(NAME, kind="environment")
def gke_deployer_reaches_the_api(graph: ApplyGraph) -> Iterable[Violation]:
    """A GitHub-hosted runner reaches a created GKE cluster through the DNS-based endpoint or an open
    public IP endpoint (sources in the module docstring)."""
    return gke_reach_violations(graph)
