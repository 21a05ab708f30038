"""The whole stack file: every section, and the checks that need more than one of them.

Each check returns (key path, message) pairs; `StackConfig` raises them together, so one run names
every key to fix.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from common import driver_versions, gpu_driver, gpus
from common.untrusted import excerpt
from stack_config.addons import AddonsConfig
from stack_config.base import StrictModel
from stack_config.cluster import DEFAULT_REGIONS, GKE_FILESTORE_CLASSES, Cloud, ClusterConfig, PoolConfig, pool_problems
from stack_config.deployer import DeployerConfig
from stack_config.entrance import implementation_for, tls_problems, with_certificate_default
from stack_config.errors import CrossCheckError
from stack_config.fields import MAX_ENTRIES
from stack_config.formats import aws_region_problem, bucket_name_problems, did_you_mean, gcp_region_problem
from stack_config.images import UPSTREAMS, ImagesConfig
from stack_config.models import ModelConfig
from stack_config.operators import OperatorsConfig
from stack_config.policy_config import PolicyConfigPath
from stack_config.security import SecurityConfig, reserved, world_open
from stack_config.serving import ExposureConfig, ModelStoreConfig, MonitoringConfig


class StackConfig(StrictModel):
    cloud: Cloud
    """Where the cluster lives: aws (EKS), gcp (GKE) or existing (any cluster reached through a kubeconfig)."""
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """The Kubernetes cluster."""
    pools: list[PoolConfig] = Field(min_length=1, max_length=MAX_ENTRIES)
    """GPU node pools."""
    operators: OperatorsConfig = Field(default_factory=OperatorsConfig)
    """NVIDIA operators."""
    modelStore: ModelStoreConfig = Field(default_factory=ModelStoreConfig, alias="modelStore")
    """Where mirrored weights live and how servers read them."""
    models: list[ModelConfig] = Field(min_length=1, max_length=MAX_ENTRIES)
    """Models to serve."""
    exposure: ExposureConfig = Field(default_factory=ExposureConfig)
    """How clients outside the cluster reach the models."""
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)
    """Prometheus Operator objects and Grafana dashboards for the servers."""
    addons: AddonsConfig = Field(default_factory=AddonsConfig)
    """Cluster add-ons (Prometheus Operator, KEDA, LeaderWorkerSet, KServe, Gateway API): installed by the program on a
    cluster it creates, declared here on an existing one."""
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    """Where nodes pull the program's images from: the upstream registries, or a pull-through cache the program creates
    (docs/security.md, "Images and supply chain")."""
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    """The stack's security profile, NetworkPolicies, cluster API endpoint access and Secrets encryption
    (docs/security.md)."""
    deployer: DeployerConfig = Field(default_factory=DeployerConfig)
    """Where `pulumi up` of this stack runs from (docs/deployer.md)."""
    policyConfig: PolicyConfigPath | None = Field(default=None, alias="policyConfig", max_length=200)
    """The policy pack's config for this stack's gate (`policies/config/<name>.json`): the offline plan runs the pack
    with it and the workflows pass it to `pulumi preview`/`up`. Default: `policies/config/<stack>.json`, the pack's
    defaults when that does not exist. Name it in a production stack, so a copy of the file keeps its settings (prod's
    `requireDigest`)."""
    role: Literal["serving"] = "serving"
    """`serving` (this schema); a stack file with `role: deployer` builds another stack's runner and VPC instead, with
    keys of its own (stack_config/deployer_stack.py, docs/deployer.md)."""

    @model_validator(mode="before")
    @classmethod
    def _certificate_default(cls, data: Any) -> Any:
        # The entrance's certificate source defaults per Gateway implementation (stack_config/entrance.py).
        return with_certificate_default(data)

    @model_validator(mode="after")
    def _cross_checks(self) -> StackConfig:
        problems = stack_problems(self)
        if problems:
            raise CrossCheckError(problems)
        return self

    def pool(self, name: str) -> PoolConfig:
        return next(p for p in self.pools if p.name == name)

    @property
    def region(self) -> str | None:
        """The cloud region (cluster.region or the cloud's default), None for an existing cluster."""
        return self.cluster.region or DEFAULT_REGIONS.get(self.cloud.value)

    @property
    def creates_cluster(self) -> bool:
        """The program creates the cluster (and so installs the add-ons its objects need)."""
        return self.cloud != Cloud.existing and self.cluster.create

    @property
    def gke_driver_version(self) -> str | None:
        """The GPU driver version of the GKE pools (validated to be one), None off GKE."""
        return self.pools[0].gkeDriverVersion if self.cloud == Cloud.gcp else None


# ---------------------------------------------------------------------------------------------
# Checks across sections


def stack_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """Every problem that needs more than one section of the stack file, as (key path, message)."""
    problems: list[tuple[str, str]] = []
    pool_names = [p.name for p in stack.pools]
    for dup in sorted({n for n in pool_names if pool_names.count(n) > 1}):
        problems.append(("pools", f"pool name {excerpt(dup)} is used twice; pool names must be unique"))
    for i, pool in enumerate(stack.pools):
        problems += [(f"pools[{i}].{k}", m) for k, m in pool_problems(stack.cloud, pool)]
    problems += name_problems(stack)
    for i, model in enumerate(stack.models):
        if model.pool not in pool_names:
            hint = did_you_mean(model.pool, pool_names)
            problems.append(
                (f"models[{i}].pool", f"no pool named {excerpt(model.pool)}{hint}; pools: {', '.join(pool_names)}")
            )
    if stack.modelStore.mirrorPool is not None and stack.modelStore.mirrorPool not in pool_names:
        problems.append(
            (
                "modelStore.mirrorPool",
                f"no pool named {excerpt(stack.modelStore.mirrorPool)}; pools: {', '.join(pool_names)}",
            )
        )
    if stack.cloud == Cloud.gcp and len(stack.cluster.name) > 40:
        problems.append(
            (
                "cluster.name",
                (
                    f"GKE cluster names have at most 40 characters; {excerpt(stack.cluster.name)} has "
                    f"{len(stack.cluster.name)}"
                ),
            )
        )
    for i, m in enumerate(stack.models):
        if m.autoscaling.enabled and not stack.monitoring.enabled:
            problems.append(
                (
                    f"models[{i}].autoscaling.enabled",
                    (
                        "autoscaling reads the queue depth Prometheus scrapes "
                        "from the servers; it needs monitoring.enabled true"
                    ),
                )
            )
        if (
            m.autoscaling.enabled
            and stack.monitoring.enabled
            and m.autoscaling.kvCacheThreshold >= stack.monitoring.kvCacheUsageAlert
        ):
            problems.append(
                (
                    f"models[{i}].autoscaling.kvCacheThreshold",
                    (
                        f"{m.autoscaling.kvCacheThreshold:g} is not below monitoring.kvCacheUsageAlert "
                        f"({stack.monitoring.kvCacheUsageAlert:g}): the KV-cache alert would fire before the "
                        "autoscaler adds a replica; lower the threshold or raise the alert"
                    ),
                )
            )
    problems += location_problems(stack)
    problems += zone_problems(stack)
    problems += network_problems(stack)
    problems += adapter_problems(stack)
    problems += entrance_problems(stack)
    problems += security_problems(stack)
    problems += network_policy_enforcement_problems(stack)
    problems += filestore_network_problems(stack)
    system_type = stack.cluster.systemPool.machineType
    if system_type and stack.cloud != Cloud.existing and (found := gpus.find_machine(stack.cloud.value, system_type)):
        gpu, machine = found
        problems.append(
            (
                "cluster.systemPool.machineType",
                (
                    f"{system_type} is a GPU machine type ({machine.gpus} x {gpu.name}); the system pool "
                    "runs untainted CPU work, so use a CPU type or leave it unset"
                ),
            )
        )
    if stack.cloud == Cloud.existing and stack.modelStore.loadFrom == "volume" and not stack.cluster.rwxStorageClass:
        problems.append(
            (
                "cluster.rwxStorageClass",
                "cloud is existing and models load from a volume, so name the cluster's ReadWriteMany StorageClass",
            )
        )
    if stack.cloud == Cloud.existing and stack.modelStore.loadFrom == "bucket":
        problems.append(
            (
                "modelStore.loadFrom",
                "bucket loading needs a cloud bucket; use volume or existing-claim on an existing cluster",
            )
        )
    problems += operator_problems(stack)
    problems += image_problems(stack)
    if stack.creates_cluster and stack.addons.preinstalled:
        problems.append(
            (
                "addons.preinstalled",
                (
                    "this stack creates its cluster, so nothing is installed on it yet and the "
                    "program installs the add-ons the stack needs; remove addons.preinstalled"
                ),
            )
        )
    if stack.cloud == Cloud.existing and not stack.cluster.kubeconfig:
        problems.append(
            (
                "cluster.kubeconfig",
                "cloud is existing: give the kubeconfig path (the ambient kubeconfig is never used by accident)",
            )
        )
    return problems


def image_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """A pull-through cache needs a cloud account to live in, and on EKS the upstreams' credentials."""
    images = stack.images
    if not images.pullThrough:
        if images.upstreamCredentials:
            return [
                (
                    "images.upstreamCredentials",
                    "only a pull-through cache reads them; set images.pullThrough true or remove them",
                )
            ]
        return []
    if stack.cloud == Cloud.existing:
        return [
            (
                "images.pullThrough",
                (
                    "cloud is existing: the program has no cloud account to create a registry "
                    "cache in; point your nodes at your own mirror, or set it false"
                ),
            )
        ]
    if stack.cloud == Cloud.gcp and images.upstreamCredentials:
        return [
            (
                "images.upstreamCredentials",
                (
                    "ECR secret ARNs mean nothing on GKE: Artifact Registry remote "
                    "repositories pull Docker Hub and ghcr.io anonymously here; remove them"
                ),
            )
        ]
    if stack.cloud == Cloud.aws:
        elsewhere = [u for u, arn in images.upstreamCredentials.items() if arn.split(":")[3] != stack.region]
        if elsewhere:
            return [
                (
                    f"images.upstreamCredentials.{u}",
                    (
                        f"the secret is in {images.upstreamCredentials[u].split(':')[3]}, "
                        f"the cluster in {stack.region}; ECR reads a pull-through cache rule's secret only from the "
                        "rule's own Region (pull-through-cache-creating-rule.html); create it there"
                    ),
                )
                for u in elsewhere
            ]
        missing = [u for u in UPSTREAMS if u not in images.upstreamCredentials]
        if missing:
            return [
                (
                    "images.upstreamCredentials",
                    (
                        f"ECR pull-through cache rules for {', '.join(missing)} need credentials in a Secrets "
                        "Manager secret named ecr-pullthroughcache/... (AWS ECR user guide, pull-through-cache.html: "
                        "Docker Hub and GitHub Container Registry require authentication); create them and give their "
                        "ARNs here, e.g. upstreamCredentials: {docker.io: "
                        "arn:aws:secretsmanager:<region>:<account>:secret:ecr-pullthroughcache/docker-hub-..., "
                        "ghcr.io: ...}"
                    ),
                )
            ]
    return []


def name_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """Every served name (model or adapter) is unique: it is what a client puts in `model`."""
    problems: list[tuple[str, str]] = []
    served = [m.served_name for m in stack.models]
    for dup in sorted({n for n in served if served.count(n) > 1}):
        problems.append(("models", f"two models are served as {excerpt(dup)}; give one a distinct `name`"))
    taken = {m.served_name: f"models[{i}]" for i, m in enumerate(stack.models)}
    names: list[tuple[str, str]] = []  # (key, name) in the order a reader meets them
    for i, model in enumerate(stack.models):
        names += [(f"models[{i}].aliases[{k}]", a) for k, a in enumerate(model.aliases)]
        for j, adapter in enumerate(model.adapters):
            names.append((f"models[{i}].adapters[{j}].name", adapter.name))
            names += [(f"models[{i}].adapters[{j}].aliases[{k}]", a) for k, a in enumerate(adapter.aliases)]
    for key, name in names:
        owner = key.rsplit(".", 1)[0]
        if name in taken:
            problems.append(
                (
                    key,
                    (
                        f"{excerpt(name)} is already the name of {taken[name]}; every model, adapter and alias "
                        "needs a distinct name (clients choose one by it)"
                    ),
                )
            )
        else:
            taken[name] = owner
    if stack.exposure.entrance is None:
        for key, _ in names:
            if ".aliases[" in key:
                problems.append(
                    (
                        key.rsplit("[", 1)[0],
                        "aliases are rewritten by the entrance's endpoint picker; they need exposure.entrance",
                    )
                )
                break
    return problems


def adapter_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """LoRA adapters are read from the model volume (vLLM loads an adapter from a local folder)."""
    problems: list[tuple[str, str]] = []
    if stack.modelStore.loadFrom == "bucket":
        for i, model in enumerate(stack.models):
            if model.adapters:
                problems.append(
                    (
                        f"models[{i}].adapters",
                        (
                            "vLLM loads LoRA adapters from a local folder, and with "
                            "modelStore.loadFrom bucket the servers have no model "
                            "volume; use loadFrom volume (or existing-claim)"
                        ),
                    )
                )
    return problems


# Gateway API v1.6.1 HTTPRoute `spec.rules` maxItems 16 (config/crd/standard/
# gateway.networking.k8s.io_httproutes.yaml; tests/fixtures/crds): one rule per base model's pool.
MAX_ROUTE_RULES = 16


def entrance_body_router(stack: StackConfig) -> str:
    """Who writes the base-model header the entrance routes on: agentgateway, bbr (GKE's Body-Based
    Router) or none (no entrance, or one base model behind it, which needs no header)."""
    entrance = stack.exposure.entrance
    if entrance is None or sum(m.engine == "vllm" for m in stack.models) < 2:
        return "none"
    return implementation_for(stack.cloud.value, stack.creates_cluster, entrance).body_router


def entrance_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """The entrance against the cloud, the other exposure and the models behind it."""
    entrance = stack.exposure.entrance
    if entrance is None:
        return []
    key = "exposure.entrance"
    problems: list[tuple[str, str]] = []
    if stack.exposure.gateway is not None:
        problems.append(
            (
                "exposure.gateway",
                (
                    "exposure.entrance already puts every model behind one Gateway; "
                    "remove exposure.gateway (the per-model path routes)"
                ),
            )
        )
    for i, model in enumerate(stack.models):
        if model.engine == "kserve":
            problems.append(
                (
                    f"models[{i}].engine",
                    (
                        "the entrance routes to vLLM servers through InferencePools, and "
                        "KServe serves the OpenAI API under its own paths; use engine "
                        "vllm or remove exposure.entrance"
                    ),
                )
            )
    if stack.cloud != Cloud.existing:
        for field in ("implementation", "gatewayClass"):
            if field in entrance.model_fields_set:
                problems.append(
                    (
                        f"{key}.{field}",
                        (
                            f"applies to cloud existing only; on {stack.cloud.value} the "
                            "program chooses the Gateway implementation (docs/routing.md)"
                        ),
                    )
                )
    elif entrance.implementation in (None, "other") and not entrance.gatewayClass:
        problems.append(
            (
                f"{key}.gatewayClass",
                (
                    "cloud is existing: name the GatewayClass of the cluster's Gateway "
                    "implementation (and `implementation: agentgateway` if it is "
                    "agentgateway, so several base models can share the entrance)"
                ),
            )
        )
    impl = implementation_for(stack.cloud.value, stack.creates_cluster, entrance)
    problems += tls_problems(stack.cloud.value, entrance, impl)
    bases = [m.served_name for m in stack.models if m.engine == "vllm"]
    if len(bases) > 1 and not impl.routes_on_body:
        problems.append(
            (
                key,
                (
                    f"{len(bases)} base models ({', '.join(bases)}) share the entrance, which needs a "
                    f"Gateway that routes on the request body's `model`; the program cannot add that to the "
                    f'{impl.title} (docs/routing.md, "Routing on the model field"); set '
                    "exposure.entrance.implementation to agentgateway or gke if the cluster's Gateway is one of "
                    "them, or serve one base model per stack (adapters may be many)"
                ),
            )
        )
    if len(bases) > MAX_ROUTE_RULES:
        problems.append(
            (
                key,
                (
                    f"{len(bases)} base models share the entrance, and its HTTPRoute takes at most "
                    f"{MAX_ROUTE_RULES} rules, one per base model (Gateway API HTTPRoute spec.rules); serve the "
                    "others as adapters of a base model or from another stack"
                ),
            )
        )
    return problems


def security_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """Cluster endpoint access and Secrets encryption against the cloud and the profile."""
    security = stack.security
    endpoint = security.clusterEndpoint
    key = "security.clusterEndpoint"
    problems: list[tuple[str, str]] = []
    if not stack.creates_cluster:
        # The endpoint and the encryption of a cluster this program does not create are its owner's;
        # the keys stay valid (a stack may move between a created and an existing cluster) and the
        # plan says they are not applied (components/cluster/*: platform summary).
        return problems
    if not endpoint.publicAccess and endpoint.publicCidrs:
        problems.append(
            (
                f"{key}.publicCidrs",
                (
                    "publicAccess is false, so there is no public endpoint for these "
                    "addresses to reach (EKS ignores publicAccessCidrs then); remove "
                    "publicCidrs or set publicAccess true"
                ),
            )
        )
    if stack.cloud == Cloud.aws:
        if not endpoint.publicAccess and not endpoint.privateAccess:
            problems.append(
                (
                    f"{key}.privateAccess",
                    (
                        "with publicAccess false the API server is reachable only "
                        "through its private endpoint (EKS refuses both off); set "
                        "privateAccess true"
                    ),
                )
            )
        for cidr in endpoint.publicCidrs:
            if reserved(cidr):
                problems.append(
                    (
                        f"{key}.publicCidrs",
                        (
                            f"{cidr} is a private or reserved range, which EKS refuses in "
                            "publicAccessCidrs; callers inside the VPC use the private "
                            "endpoint (privateAccess true), list public addresses only"
                        ),
                    )
                )
        if "dnsEndpoint" in endpoint.model_fields_set:
            problems.append(
                (f"{key}.dnsEndpoint", "applies to GKE only; EKS reaches its API on the IP endpoints above")
            )
    elif stack.cloud == Cloud.gcp:
        if endpoint.dnsEndpoint is False and not endpoint.publicAccess and stack.deployer.runner == "github-hosted":
            problems.append(
                (
                    f"{key}.dnsEndpoint",
                    (
                        "with publicAccess false and the DNS endpoint off, the API server answers only inside "
                        "the VPC, and a GitHub-hosted runner (deployer.runner) cannot reach it; set dnsEndpoint "
                        "true (IAM-authorized), or deploy from a runner inside the VPC (deployer.runner: "
                        "self-hosted)"
                    ),
                )
            )
        if "privateAccess" in endpoint.model_fields_set:
            problems.append(
                (f"{key}.privateAccess", "applies to EKS only; a GKE control plane always has an internal endpoint")
            )
        if not endpoint.publicAccess and not stack.cluster.network.privateNodes:
            problems.append(
                (
                    f"{key}.publicAccess",
                    (
                        "a GKE private endpoint exists only on a cluster with private "
                        "nodes; set cluster.network.privateNodes true (with vpc create)"
                    ),
                )
            )
    if security.production and endpoint.is_world_open and not endpoint.allowWorldOpen:
        opened = (
            "has publicCidrs that together admit every public address"
            if endpoint.publicCidrs
            else "is public with no publicCidrs"
        )
        problems.append(
            (
                f"{key}.publicCidrs",
                (
                    f"security.profile is production and the cluster API endpoint {opened}, "
                    "so anyone on the internet can reach the API server; list the "
                    "addresses that administer the cluster in publicCidrs (the runner of "
                    "`pulumi up` among them), set publicAccess false and run from inside "
                    "the VPC, or accept it knowingly with allowWorldOpen: true"
                ),
            )
        )
    if any(world_open(c) for c in endpoint.publicCidrs) and len(endpoint.publicCidrs) > 1:
        problems.append(
            (
                f"{key}.publicCidrs",
                (
                    "0.0.0.0/0 already admits every address; the other CIDRs restrict "
                    "nothing: remove 0.0.0.0/0 or the rest"
                ),
            )
        )
    encryption = security.secretsEncryption
    kms = encryption.kmsKey
    if kms is not None:
        if encryption.enabled is False:
            problems.append(
                ("security.secretsEncryption.kmsKey", "enabled is false; remove kmsKey or enable secrets encryption")
            )
        is_arn = kms.startswith("arn:")
        if stack.cloud == Cloud.aws and not is_arn:
            problems.append(
                (
                    "security.secretsEncryption.kmsKey",
                    "on EKS name an AWS KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)",
                )
            )
        elif stack.cloud == Cloud.gcp and is_arn:
            problems.append(
                (
                    "security.secretsEncryption.kmsKey",
                    "on GKE name a Cloud KMS key (projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>)",
                )
            )
        elif stack.cloud == Cloud.aws and kms.split(":")[3] != stack.region:
            # EKS: "The CMK must be symmetric, created in the same region as the cluster"
            # (pulumi_aws eks ClusterEncryptionConfigProviderArgs.key_arn).
            problems.append(
                (
                    "security.secretsEncryption.kmsKey",
                    (
                        f"the key is in {kms.split(':')[3]}, the cluster "
                        f"in {stack.region}; EKS needs a key of the "
                        "cluster's region"
                    ),
                )
            )
        elif stack.cloud == Cloud.gcp and kms.split("/")[3] != stack.region:
            # GKE: the key ring must be in the cluster's location ("Encrypt secrets at the application
            # layer", Requirements, https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets).
            problems.append(
                (
                    "security.secretsEncryption.kmsKey",
                    (
                        f"the key ring is in {kms.split('/')[3]}, the "
                        f"cluster in {stack.region}; use a key ring of "
                        "the cluster's region"
                    ),
                )
            )
    return problems


# The default VPC's subnets are public (a route to the internet gateway, public IPs on launch).
# EC2 assigns a public IPv4 address only to an instance launched with one network interface
# (EC2 API, InstanceNetworkInterfaceSpecification.AssociatePublicIpAddress; Karpenter v1.14 docs,
# concepts/nodeclasses.md "associatePublicIPAddress"), so an EFA node, with one interface per
# network card, gets none there and cannot reach ECR, EKS or STS: it never joins.
EFA_NEEDS_PRIVATE_SUBNETS = (
    "EFA nodes carry one network interface per network card, and EC2 gives a public IPv4 address only to "
    "instances with a single interface, so in public subnets they have no route to ECR, EKS or STS and never "
    "join the cluster; use cluster.network.vpc create (private subnets behind NAT) or existing"
)


def network_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """Networking keys against the cloud and the VPC mode; EFA only where nodes are private."""
    network = stack.cluster.network
    given = network.model_fields_set
    key = "cluster.network"
    problems: list[tuple[str, str]] = []
    if (
        stack.cloud == Cloud.existing
        or (stack.cloud == Cloud.aws and not stack.cluster.create)
        or (stack.cloud == Cloud.gcp and not stack.cluster.create)
    ):
        if given:
            why = (
                "cloud is existing: nothing is created"
                if stack.cloud == Cloud.existing
                else "cluster.create is false: node pools join the cluster's own network"
            )
            problems.append((key, f"{why}; remove cluster.network"))
        return problems
    create_only = {"cidr", "zoneCount", "natGateways"} & given
    if stack.cloud == Cloud.gcp:
        for field in sorted(create_only | ({"privateSubnetIds"} & given)):
            problems.append((f"{key}.{field}", "applies to EKS only; on GKE the program sizes its own subnet"))
        if network.vpc in ("existing", "deployer"):
            problems.append((f"{key}.vpc", f"{network.vpc} is supported on EKS only; on GKE use create or default"))
        if network.privateNodes and network.vpc == "default":
            problems.append(
                (
                    f"{key}.privateNodes",
                    "private nodes need the Cloud NAT of a network this stack creates; set vpc: create",
                )
            )
        return problems
    # aws, created cluster
    if "privateNodes" in given:
        problems.append(
            (
                f"{key}.privateNodes",
                "applies to GKE only; on EKS nodes are in private subnets with vpc create or existing",
            )
        )
    if network.vpc != "create":
        for field in sorted(create_only):
            problems.append((f"{key}.{field}", f"applies only with vpc: create (vpc is {network.vpc})"))
    if network.vpc == "existing" and not network.privateSubnetIds:
        problems.append(
            (
                f"{key}.privateSubnetIds",
                "vpc is existing: list the private subnets (at least two zones) the cluster and its nodes use",
            )
        )
    if network.vpc != "existing" and network.privateSubnetIds:
        problems.append((f"{key}.privateSubnetIds", "applies only with vpc: existing"))
    if network.vpc == "default":
        for i, pool in enumerate(stack.pools):
            if pool.efa:
                problems.append(
                    (
                        f"pools[{i}].efa",
                        f"cluster.network.vpc is default, whose subnets are public: {EFA_NEEDS_PRIVATE_SUBNETS}",
                    )
                )
    version = stack.cluster.kubernetesVersion
    if driver_versions.eks_release_version(version) is None:
        known = ", ".join(sorted(driver_versions.EKS_RELEASE_VERSIONS))
        problems.append(
            (
                "cluster.kubernetesVersion",
                (
                    f"{version} has no EKS AMI release pinned by this program "
                    f"(AMI {driver_versions.EKS_AMI_RELEASE}: {known}); use one of those"
                ),
            )
        )
    for i, pool in enumerate(stack.pools):
        if pool.desiredNodes is not None and pool.desiredNodes != pool.minNodes:
            problems.append(
                (
                    f"pools[{i}].desiredNodes",
                    (
                        "on a created EKS cluster minNodes nodes are always on and "
                        "Karpenter launches the rest for pending pods; remove "
                        "desiredNodes"
                    ),
                )
            )
    return problems


def location_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """The region in the chosen cloud's own format, and a bucket name its storage accepts."""
    problems: list[tuple[str, str]] = []
    region = stack.cluster.region
    if region is not None:
        if stack.cloud == Cloud.aws:
            problem = aws_region_problem(region)
        elif stack.cloud == Cloud.gcp:
            # An existing zonal GKE cluster is found by its zone (create: false).
            problem = gcp_region_problem(region, zone_allowed=not stack.cluster.create)
        else:
            problem = None
        if problem:
            problems.append(("cluster.region", problem))
    if stack.modelStore.bucketName is not None:
        problems += [
            ("modelStore.bucketName", p) for p in bucket_name_problems(stack.cloud.value, stack.modelStore.bucketName)
        ]
    return problems


def zone_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """GKE pools' zones: in the cluster's region, and an initial size the zones can start."""
    system = stack.cluster.systemPool
    if stack.cloud != Cloud.gcp:
        return [("cluster.systemPool.zones", "zones apply to GKE only")] if system.zones else []
    # An existing zonal cluster's region is itself a zone; its pools may name that zone.
    region = stack.region or ""
    pools = [
        (f"pools[{i}]", p.zones, p.desiredNodes if p.desiredNodes is not None else p.minNodes, p.maxNodes)
        for i, p in enumerate(stack.pools)
    ]
    if stack.cluster.create:
        pools.append(("cluster.systemPool", system.zones, system.minNodes, system.maxNodes))
    problems = []
    for where, zones, initial, max_nodes in pools:
        for zone in zones or []:
            if not zone.startswith(f"{region}-") and zone != region:
                problems.append(
                    (f"{where}.zones", f"{excerpt(zone)} is not in region {region}; list zones of {region}")
                )
        count = len(zones) if zones else 1
        per_zone = -(-initial // count)
        if per_zone * count > max_nodes:
            problems.append(
                (
                    f"{where}.zones",
                    (
                        f"GKE starts the same number of nodes in each zone, so {initial} node(s) "
                        f"over {count} zones start {per_zone * count}, more than maxNodes "
                        f"({max_nodes}); raise maxNodes to {per_zone * count} or list fewer zones"
                    ),
                )
            )
    return problems


def operator_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """Operator options that cannot work with the chosen cloud, node images, pools and models.

    Driver mode, MIG strategy and time-slicing on GKE are decided by the operators' own decision
    functions (common/gpu_driver.py), so the config refuses exactly what the chart
    values and the GKE node pools would not serve.
    """

    gpu_op = stack.operators.gpuOperator
    problems: list[tuple[str, str]] = []
    versions = sorted({p.gkeDriverVersion for p in stack.pools})
    if stack.cloud == Cloud.gcp and len(versions) > 1:
        problems.append(
            (
                "pools",
                (
                    f"all GKE pools must use one gkeDriverVersion (the GPU Operator is configured "
                    f"once for the cluster); found {', '.join(versions)}"
                ),
            )
        )
    if stack.cloud == Cloud.gcp and not gpu_op.enabled and gpu_driver.GKE_INSTALLATION_DISABLED in versions:
        first = next(i for i, p in enumerate(stack.pools) if p.gkeDriverVersion == gpu_driver.GKE_INSTALLATION_DISABLED)
        problems.append(
            (
                f"pools[{first}].gkeDriverVersion",
                (
                    "INSTALLATION_DISABLED needs the GPU Operator to install "
                    "the driver, but operators.gpuOperator.enabled is false; "
                    "use LATEST or DEFAULT"
                ),
            )
        )
    if gpu_op.enabled:
        gke_version = versions[0] if stack.cloud == Cloud.gcp and len(versions) == 1 else None
        for err in gpu_driver.gpu_operator_problems(stack.cloud.value, gpu_op.driver, gpu_op, gke_version):
            key = err.key
            if key == gpu_driver.GKE_DRIVER_VERSION_KEY:
                first = next(i for i, p in enumerate(stack.pools) if p.gkeDriverVersion == gke_version)
                key = f"pools[{first}].gkeDriverVersion"
            problems.append((key, err.message))
    problems += mig_problems(stack)
    if stack.cloud == Cloud.aws and stack.operators.networkOperator.enabled:
        problems.append(
            (
                "operators.networkOperator.enabled",
                "on EKS, multi-node NCCL goes over EFA (pools[].efa), not the Network Operator; turn it off",
            )
        )
    replicas = gpu_op.timeSlicingReplicas if gpu_op.enabled else None
    if replicas:
        for i, m in enumerate(stack.models):
            if isinstance(m.tensorParallelSize, int) and m.tensorParallelSize * m.pipelineParallelSize > 1:
                problems.append(
                    (
                        f"models[{i}].tensorParallelSize",
                        "GPU time-slicing gives each pod one shared GPU; a model sharded across GPUs cannot run on it",
                    )
                )
            # N pods share one GPU's memory; vLLM refuses to start when the free memory is below its
            # share, and CUDA contexts need the rest.
            if m.gpuMemoryUtilization * replicas > TIME_SLICED_MEMORY_LIMIT:
                largest = math.floor(TIME_SLICED_MEMORY_LIMIT / replicas * 100) / 100
                problems.append(
                    (
                        f"models[{i}].gpuMemoryUtilization",
                        (
                            f"{m.gpuMemoryUtilization} x {replicas} pods per GPU "
                            f"(operators.gpuOperator.timeSlicingReplicas) exceeds {TIME_SLICED_MEMORY_LIMIT} of "
                            f"the GPU's memory; set it to at most {largest}"
                        ),
                    )
                )
    return problems


# Share of a time-sliced GPU's memory all its pods together may claim.
TIME_SLICED_MEMORY_LIMIT = 0.95


def mig_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """MIG slices reach the servers only as nvidia.com/gpu under the single strategy, one slice per pod."""
    gpu_op = stack.operators.gpuOperator
    single = gpu_op.enabled and gpu_op.migStrategy == "single"
    problems: list[tuple[str, str]] = []
    mig_pools = set()
    for i, pool in enumerate(stack.pools):
        profiles = gpus.MIG_PROFILES.get(pool.gpu, {})
        key = f"pools[{i}].migProfile"
        if pool.migProfile is None:
            if single and profiles:
                problems.append(
                    (
                        key,
                        (
                            f"operators.gpuOperator.migStrategy is single: name the MIG profile this "
                            f"pool's {pool.gpu} GPUs are cut into, one of {', '.join(profiles)}"
                        ),
                    )
                )
            continue
        if not single:
            problems.append((key, "needs operators.gpuOperator.enabled with migStrategy single"))
        elif not profiles:
            problems.append((key, f"{pool.gpu} has no MIG profiles in the catalog; remove migProfile"))
        elif pool.migProfile not in profiles:
            hint = did_you_mean(pool.migProfile, profiles)
            problems.append(
                (
                    key,
                    (
                        f"{excerpt(pool.migProfile)} is not a MIG profile of {pool.gpu}{hint}; "
                        f"use one of {', '.join(profiles)}"
                    ),
                )
            )
        else:
            mig_pools.add(pool.name)
    for i, m in enumerate(stack.models):
        if (
            m.pool in mig_pools
            and isinstance(m.tensorParallelSize, int)
            and m.tensorParallelSize * m.pipelineParallelSize > 1
        ):
            problems.append(
                (
                    f"models[{i}].tensorParallelSize",
                    (
                        f"pool {m.pool} serves MIG slices and a container "
                        "sees one slice; use 1 (or a pool without migProfile)"
                    ),
                )
            )
    return problems


def network_policy_enforcement_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """NetworkPolicies on a cluster this program does not create need a declared enforcer.

    A NetworkPolicy is only an API object: the network plugin implements it, and one created where
    no plugin does has no effect (Kubernetes docs, Network Policies, "Prerequisites",
    https://kubernetes.io/docs/concepts/services-networking/network-policies/#prerequisites).
    The program turns enforcement on in the clusters it creates (components/cluster/gcp/gke.py,
    components/cluster/aws/eks.py); another cluster's plugin is its owner's, so the stack file says
    which one enforces, or turns the policies' claim off.
    """
    security = stack.security
    if stack.creates_cluster or not security.networkPolicies or security.networkPolicyEnforcement is not None:
        return []
    where = "cloud is existing" if stack.cloud == Cloud.existing else "cluster.create is false"
    return [
        (
            "security.networkPolicyEnforcement",
            (
                f"security.networkPolicies is on but {where}, so this program cannot turn NetworkPolicy enforcement "
                "on, and a NetworkPolicy nothing enforces admits everything; check the cluster's network plugin "
                "(kubectl -n kube-system get daemonsets: anetd for GKE Dataplane V2, calico-node, cilium, or aws-node "
                "with its aws-network-policy-agent container on EKS) and name it here (gke-dataplane-v2, gke-calico, "
                "eks-vpc-cni, calico, cilium, antrea or other), or set security.networkPolicies false"
            ),
        )
    ]


def filestore_network_problems(stack: StackConfig) -> list[tuple[str, str]]:
    """GKE's own Filestore classes create instances on the `default` network, which the nodes of a
    network the stack creates cannot reach, so the model volume would never mount."""
    rwx = stack.cluster.rwxStorageClass
    if not (stack.cloud == Cloud.gcp and stack.creates_cluster and stack.cluster.network.vpc == "create"):
        return []
    if rwx not in GKE_FILESTORE_CLASSES:
        return []
    return [
        (
            "cluster.rwxStorageClass",
            (
                f"{rwx} is one of GKE's Filestore classes, which create their instances on the project's default "
                "network, but this stack puts the cluster on a network of its own (cluster.network.vpc create), so "
                "the model volume would never mount; leave rwxStorageClass unset (the program creates "
                "llm-serving-filestore on the stack's network) or name a class of yours whose parameters.network is "
                "the cluster's network"
            ),
        )
    ]
