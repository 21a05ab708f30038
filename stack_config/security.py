"""Security: the stack's profile, NetworkPolicies in the serving namespace, who may reach the
cluster's API endpoint, and whether Kubernetes Secrets are encrypted with a cloud KMS key.

The checks that need the cloud (EKS or GKE, private nodes, an existing cluster) are in
stack_config/stack.py `security_problems`; docs/security.md ("Network and cluster API") says what
each control protects against and how to relax it knowingly.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator

from common import contract
from stack_config.base import StrictModel
from stack_config.fields import Ipv4Cidr, KmsKey, NamespaceName

# EKS accepts at most 40 public endpoint access CIDR ranges per cluster, a quota that cannot be
# raised (Amazon EKS User Guide, "View and manage Amazon EKS and Fargate service quotas": "Public
# endpoint access CIDR ranges per cluster | 40 | No",
# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html). GKE allows more authorized
# networks (50 with a public endpoint, per its "Add authorized networks" page,
# https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks; unverified at today's
# limit), so the stricter number holds for both clouds and one list serves either.
MAX_PUBLIC_CIDRS = 40

Profile = Literal["development", "production"]
# What enforces NetworkPolicy on an existing cluster (security.networkPolicyEnforcement); the names
# are common/contract.py's NETWORK_POLICY_ENFORCERS.
Enforcer = Literal["gke-dataplane-v2", "gke-calico", "eks-vpc-cni", "calico", "cilium", "antrea", "other"]


def world_open(cidr: str) -> bool:
    """Does this CIDR admit every IPv4 address (a /0)?"""
    return ipaddress.IPv4Network(cidr).prefixlen == 0


# The IPv4 blocks that are not globally routable (IANA IPv4 Special-Purpose Address Registry,
# https://www.iana.org/assignments/iana-ipv4-special-registry/, "Globally Reachable" false, plus
# multicast 224.0.0.0/4 and the reserved 240.0.0.0/4): every other address is the public internet.
NOT_GLOBAL = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)


def _without(blocks: list[ipaddress.IPv4Network], cut: ipaddress.IPv4Network) -> list[ipaddress.IPv4Network]:
    left: list[ipaddress.IPv4Network] = []
    for block in blocks:
        if block.subnet_of(cut):
            continue
        left.extend(block.address_exclude(cut) if cut.subnet_of(block) else [block])
    return left


def uncovered_public(cidrs: list[str]) -> list[ipaddress.IPv4Network]:
    """The public (globally routable) addresses none of the CIDRs admits. Empty: together they open the
    endpoint to the whole internet, whatever the split (0.0.0.0/1 with 128.0.0.0/1 is a /0)."""
    left = [ipaddress.IPv4Network("0.0.0.0/0")]
    for cut in [*NOT_GLOBAL, *ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in cidrs)]:
        left = _without(left, cut)
        if not left:
            break
    return left


def reserved(cidr: str) -> bool:
    """A private, loopback, link-local or otherwise reserved range: EKS refuses these in
    publicAccessCidrs ("The block cannot include reserved addresses", EKS User Guide, "Configure
    network access to cluster API server endpoint"); such callers reach the private endpoint."""
    net = ipaddress.IPv4Network(cidr)
    return not world_open(cidr) and (
        net.is_private or net.is_reserved or net.is_loopback or net.is_link_local or net.is_multicast
    )


class ClusterEndpointConfig(StrictModel):
    publicAccess: bool = Field(True, alias="publicAccess")
    """The cluster's API server answers on a public address (EKS endpointPublicAccess; on GKE false sets
    privateClusterConfig.enablePrivateEndpoint and needs cluster.network.privateNodes). With false, `pulumi up` and
    kubectl must run from inside the VPC (or a network peered or VPN-connected to it)."""
    privateAccess: bool = Field(True, alias="privateAccess")
    """EKS: the API server also answers inside the VPC (endpointPrivateAccess), so nodes and pods reach it without
    leaving the VPC. Required when publicAccess is false. GKE always has an internal endpoint."""
    publicCidrs: list[Ipv4Cidr] = Field(default_factory=list, max_length=MAX_PUBLIC_CIDRS, alias="publicCidrs")
    """The only addresses that may call the public endpoint (EKS publicAccessCidrs, GKE master authorized networks), at
    most 40 (EKS's fixed quota). Empty with publicAccess true means the whole internet: refused in a production profile
    unless allowWorldOpen."""
    dnsEndpoint: bool | None = Field(None, alias="dnsEndpoint")
    """GKE: the cluster's DNS-based control-plane endpoint accepts user traffic (allowExternalTraffic), authorized by
    IAM (`container.clusters.connect`) rather than by address, and the Kubernetes provider of `pulumi up` connects
    through it. Default: on for a cluster this program creates, so a GitHub-hosted runner reaches a cluster whose IP
    endpoint is private. The IP endpoint keeps the settings above. EKS has no such endpoint."""
    allowWorldOpen: bool = Field(False, alias="allowWorldOpen")
    """Knowingly accept a public endpoint open to every address (no publicCidrs, or 0.0.0.0/0) in a production profile.
    Authentication still guards the API; the endpoint is just reachable for probing and credential attacks from
    anywhere."""

    @field_validator("publicCidrs")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a CIDR is listed twice")
        return v

    @property
    def is_world_open(self) -> bool:
        """The public endpoint is on and admits every address."""
        return self.publicAccess and (not self.publicCidrs or not uncovered_public(self.publicCidrs))


class SecretsEncryptionConfig(StrictModel):
    enabled: bool | None = None
    """Encrypt Kubernetes Secrets (the HF token, the API key) with a cloud KMS key (EKS envelope encryption, GKE
    application-layer secrets encryption). Default: on in the production profile, off in development. Once on, EKS
    cannot turn it off again."""
    kmsKey: KmsKey | None = Field(None, alias="kmsKey")
    """The key to use: an AWS KMS key ARN on EKS, a Cloud KMS CryptoKey name (projects/.../cryptoKeys/...) on GKE.
    Default: a key this program creates (rotation on) in the cluster's region."""


class SecurityConfig(StrictModel):
    profile: Profile = "development"
    """production: the controls a shared or internet-facing deployment needs are required (a restricted cluster endpoint
    unless clusterEndpoint.allowWorldOpen, Secrets encryption on by default) and the policy pack enforces them;
    development relaxes those defaults."""
    networkPolicies: bool = Field(True, alias="networkPolicies")
    """Default-deny NetworkPolicies in the serving namespace, then only the paths the stack needs (docs/security.md);
    the cluster's network plugin must enforce NetworkPolicy (GKE Dataplane V2 / Calico, the EKS VPC CNI's network policy
    agent)."""
    networkPolicyEnforcement: Enforcer | None = Field(None, alias="networkPolicyEnforcement")
    """On a cluster this program does not create (cloud existing, or cluster.create false): the cluster's network plugin
    that enforces NetworkPolicy (gke-dataplane-v2, gke-calico, eks-vpc-cni with enableNetworkPolicy, calico, cilium,
    antrea, other), declared after checking it. Required there while networkPolicies is on: a NetworkPolicy nothing
    enforces admits everything. Ignored on a created cluster, where the program turns enforcement on itself (GKE
    Dataplane V2, the EKS VPC CNI's network policy agent)."""
    allowedClientNamespaces: list[NamespaceName] = Field(
        default_factory=list, max_length=64, alias="allowedClientNamespaces"
    )
    """Namespaces whose pods may call the servers' API port directly (the in-cluster endpoints), besides the entrance
    and Prometheus."""
    clusterEndpoint: ClusterEndpointConfig = Field(default_factory=ClusterEndpointConfig, alias="clusterEndpoint")
    """Who may reach the Kubernetes API server of a created cluster."""
    secretsEncryption: SecretsEncryptionConfig = Field(
        default_factory=SecretsEncryptionConfig, alias="secretsEncryption"
    )
    """Kubernetes Secrets encrypted at rest with a cloud KMS key."""

    @property
    def production(self) -> bool:
        return self.profile == "production"

    @property
    def cluster_labels(self) -> dict[str, str]:
        """Tags (EKS) or resource labels (GKE) of a created cluster that tell the policy pack's
        cluster-endpoint-restricted rule the profile, and an endpoint knowingly left open."""
        labels: dict[str, str] = {contract.CLUSTER_PROFILE_TAG: self.profile}
        if self.clusterEndpoint.allowWorldOpen:
            labels[contract.WORLD_OPEN_ENDPOINT_TAG] = contract.WORLD_OPEN_ALLOWED
        return labels

    @property
    def encrypt_secrets(self) -> bool:
        """Secrets encryption after the profile's default."""
        enabled = self.secretsEncryption.enabled
        return self.production if enabled is None else enabled
