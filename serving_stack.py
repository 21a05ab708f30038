"""llm-serving, a served stack: wiring only (__main__.py runs it for every stack without `role: deployer`).

Read and validate the stack config, plan every model from its own config.json, then build
cluster -> operators -> model store -> servers, and export what a person needs to use them.
Every decision lives in a component or in planner/plan.py; this file only connects them.
"""

from typing import Any

import pulumi

import stack_config as config
from common import contract, pod_security
from components.addons import AddOns, AddOnsArgs, addon_table, needed_addons, undeclared_problems
from components.cluster.interface import RdmaAttachment
from components.cluster.select import create_cluster
from components.entrance import Entrance, EntranceArgs, bbr, google_cert, picker
from components.model_store.store import (
    MIRROR_POD_SECURITY_EXCEPTION,
    ModelStore,
    ServingNamespace,
    ServingNamespaceArgs,
    mirror_runs_as_root,
    model_store_args,
)
from components.network_policy import ServingNetworkPolicies, enforcement, network_policy_spec
from components.operators import GpuAlerting, GpuOperator, NetworkOperator, NetworkOperatorArgs, OperatorsArgs
from components.serving import kserve
from components.serving.alerts import AlertThresholds
from components.serving.kserve import KServeModel, KServeModelArgs
from components.serving.vllm import GatewayExposure, ServerStorage, VllmServer, VllmServerArgs
from components.verification import Verification, VerificationArgs, VerificationTarget
from planner import driver_check, plan
from planner.plan import PlanError
from stack_config import ConfigError, pool_machine
from stack_config.deployer import deployer_summary
from stack_config.entrance import default_certificate, implementation_for
from stack_config.stack import entrance_body_router

try:
    loaded = config.load()
    stack = loaded.config
    plans = plan.build_plans(
        stack,
        plan.default_metadata_loader(loaded.hub_token),
        source=loaded.source,
        load_adapter=plan.default_adapter_loader(loaded.hub_token),
    )
    # The stack as deployed: replicas, queue thresholds and pools' node counts the plan derived from
    # models[].load where the stack file leaves them unset (planner/plan.py deployed_config).
    stack = plan.deployed_config(stack, plans)
    # The add-ons the stack's custom resources need; an existing cluster must declare them.
    addon_needs = needed_addons(stack, plans)
    undeclared = undeclared_problems(stack, addon_needs, loaded.source)
    if undeclared:
        raise ConfigError(undeclared)
    # The cloud layer looks some config up in the account (a Capacity Block's zone), so it can
    # still find a config problem.
    cluster = create_cluster(stack, loaded.stack)
except (ConfigError, PlanError) as err:
    # One line per problem, no traceback: these are the stack file's problems, not the program's.
    raise pulumi.RunError("\n".join(err.problems)) from None

# Every cluster layer is a ComponentResource (the Cluster protocol cannot say so), and what runs on
# the cluster depends on it as one.
assert isinstance(cluster, pulumi.Resource)

# Everything on the cluster waits for the whole cluster layer: its node pools, and the RWX
# StorageClass a model volume binds to (EFS on EKS), not only for the API endpoint.
k8s_opts = pulumi.ResourceOptions(provider=cluster.provider, depends_on=[cluster])

# Add-ons first (installed on a created cluster, looked up on an existing one): every custom
# resource below waits for what provides its kind, through `addons.crds`.
# Every namespace the stack creates pins the Pod Security policy of the cluster's own version.
psa_version = pod_security.psa_version(stack.cluster.kubernetesVersion)
addons = AddOns(
    "addons",
    AddOnsArgs(
        needs=addon_needs,
        creates_cluster=stack.creates_cluster,
        system_node_selector={contract.LABEL_POOL: contract.SYSTEM_POOL} if stack.creates_cluster else None,
        image_mirrors=cluster.image_mirrors,
        psa_version=psa_version,
    ),
    k8s_opts,
)

# Operators wait for the cluster (and so its GPU pools); servers wait for the operators.
placements = list(cluster.placements.values())
monitoring = stack.monitoring
operator_args = OperatorsArgs(
    config=stack.operators,
    cloud=stack.cloud.value,
    placements=placements,
    gke_driver_version=stack.gke_driver_version,
    crds=addons.crds,
    gpu_alerting=GpuAlerting(dict(monitoring.labels), monitoring.runbookUrl) if monitoring.enabled else None,
    image_mirrors=cluster.image_mirrors,
    psa_version=psa_version,
)
operators_ready: list[pulumi.Resource] = []
gpu_operator = None
rdma = None
if stack.operators.gpuOperator.enabled:
    gpu_operator = GpuOperator("gpu-operator", operator_args, k8s_opts)
    operators_ready += gpu_operator.ready
if stack.operators.networkOperator.enabled:
    network_args = NetworkOperatorArgs(
        **vars(operator_args),
        workload_namespace=stack.modelStore.namespace,
        rdma_interface=stack.operators.networkOperator.interface,
    )
    network_operator = NetworkOperator("network-operator", network_args, gpu_operator, k8s_opts)
    operators_ready += network_operator.ready
    rdma = RdmaAttachment(network_operator.rdma_resource, network=network_operator.network_name)

# The serving namespace's Pod Security level follows from what this stack runs in it.
pod_security_exceptions = {}
if any(
    mirror_runs_as_root(p.load_from)
    for p in plans
    if not (p.model.engine == "kserve" and p.model.kserveStorage == "hf")
):
    pod_security_exceptions["mirror"] = MIRROR_POD_SECURITY_EXCEPTION
if any(p.model.engine == "kserve" for p in plans):
    pod_security_exceptions["kserve"] = kserve.POD_SECURITY_EXCEPTION
if stack.exposure.entrance is not None:
    pod_security_exceptions["entrance"] = picker.POD_SECURITY_EXCEPTION
if entrance_body_router(stack) == "bbr":
    pod_security_exceptions["body-router"] = bbr.POD_SECURITY_EXCEPTION
shared = ServingNamespace(
    "serving",
    ServingNamespaceArgs(
        namespace=stack.modelStore.namespace,
        bucket=cluster.bucket,
        pod_security_exceptions=pod_security_exceptions,
        annotations=enforcement.namespace_annotations(stack),
        psa_version=psa_version,
    ),
    k8s_opts,
)

# Default-deny in the serving namespace, then only the paths the stack needs (docs/security.md).
if stack.security.networkPolicies:
    network_policies = ServingNetworkPolicies(
        "serving-network", network_policy_spec(stack, plans), [shared.namespace_resource], k8s_opts
    )
    pulumi.export("networkPolicies", network_policies.summary)

gateway = stack.exposure.gateway
mirror_placement = cluster.placements[stack.modelStore.mirrorPool] if stack.modelStore.mirrorPool else None
endpoints: dict[str, Any] = {}
warnings: list[str] = []
adapter_rules: list[dict[str, Any]] = []
verify_targets: list[VerificationTarget] = []
servers: list[pulumi.Resource] = []
for model_plan in plans:
    name = model_plan.served_name
    placement = cluster.placements[model_plan.pool.name]
    machine = pool_machine(stack.cloud, model_plan.pool)
    kserve_from_hub = model_plan.model.engine == "kserve" and model_plan.model.kserveStorage == "hf"
    # A KServe model read from hf:// is fetched by KServe's storage initializer; no mirror for it.
    store = (
        None
        if kserve_from_hub
        else ModelStore(
            name,
            model_store_args(
                model_plan,
                stack.modelStore,
                shared=shared,
                storage_class=cluster.rwx_storage_class,
                bucket=cluster.bucket,
                hf_token=loaded.hf_token,
                placement=mirror_placement,
                staging_storage_class=cluster.staging_storage_class,
                image_mirrors=cluster.image_mirrors,
            ),
            k8s_opts,
        )
    )
    server: KServeModel | VllmServer
    if model_plan.model.engine == "kserve":
        kserve_storage = model_plan.model.kserveStorage
        server = KServeModel(
            name,
            KServeModelArgs(
                plan=model_plan,
                placement=placement,
                namespace=stack.modelStore.namespace,
                storage=kserve_storage,
                crds=addons.crds,
                bucket=cluster.bucket,
                claim_name=store.claim_name if store else None,
                reader_service_account=shared.reader_service_account,
                hf_token=loaded.hf_token,
                machine=machine,
                canary_baseline_revision=model_plan.model.canaryBaselineRevision,
                monitoring=monitoring.enabled,
                monitoring_labels=dict(monitoring.labels),
                api_key=loaded.api_key,
                api_key_next=loaded.api_key_next,
                allow_unauthenticated=stack.exposure.allowUnauthenticated,
                image_mirrors=cluster.image_mirrors,
                dashboard_namespace=monitoring.dashboardNamespace,
                runbook_url=monitoring.runbookUrl,
                alert_thresholds=AlertThresholds(
                    kv_cache_usage=monitoring.kvCacheUsageAlert, error_ratio=monitoring.errorRateAlert
                ),
                depends_on=([store.mirror_job] if store else []) + operators_ready,
            ),
            k8s_opts,
        )
    else:
        assert store is not None  # only a KServe model read from hf:// goes without one
        storage = ServerStorage(**store.server_storage())
        storage.depends_on = storage.depends_on + operators_ready
        server = VllmServer(
            name,
            VllmServerArgs(
                plan=model_plan,
                placement=placement,
                namespace=stack.modelStore.namespace,
                storage=storage,
                crds=addons.crds,
                machine=machine,
                api_key=loaded.api_key,
                api_key_next=loaded.api_key_next,
                allow_unauthenticated=stack.exposure.allowUnauthenticated,
                # The pool's own fabric (AWS EFA) where it has one, else the Network Operator's.
                rdma=cluster.rdma_attachments.get(model_plan.pool.name, rdma),
                gateway=GatewayExposure(gateway.name, gateway.namespace, gateway.hostname) if gateway else None,
                update_strategy=model_plan.model.updateStrategy,
                monitoring=monitoring.enabled,
                monitoring_labels=dict(monitoring.labels),
                dashboard_namespace=monitoring.dashboardNamespace,
                alert_thresholds=AlertThresholds(
                    kv_cache_usage=monitoring.kvCacheUsageAlert, error_ratio=monitoring.errorRateAlert
                ),
                runbook_url=monitoring.runbookUrl,
                image_mirrors=cluster.image_mirrors,
            ),
            k8s_opts,
        )
    endpoints[name] = server.endpoint
    servers.append(server)
    if isinstance(server, VllmServer):
        verify_targets.append(
            VerificationTarget(
                model_plan,
                server.internal_endpoint.apply(lambda url: url.removesuffix("/v1")),
                server.api_key_secret_name,
            )
        )
    warnings += list(model_plan.sizing_warnings) + server.warnings
    adapter_rules = adapter_rules or server.prometheus_adapter_rules

# The one entrance: a Gateway and an InferencePool (with its endpoint picker) per base model.
entrance_config = stack.exposure.entrance
if entrance_config is not None:
    implementation = implementation_for(stack.cloud.value, stack.creates_cluster, entrance_config)
    tls = entrance_config.tls
    # On GKE a Google-managed Certificate Manager certificate (components/entrance/google_cert.py):
    # the GKE Gateway controller cannot serve cert-manager's HTTP-01 challenge before it has a certificate.
    google_certificate = None
    if tls.certificate == "google-managed":
        assert stack.region is not None  # google-managed is cloud gcp only (stack_config/entrance.py tls_problems)
        cert_name = google_cert.certificate_name(stack.cluster.name)
        google_certificate = google_cert.GoogleManagedCertificate(
            "entrance-certificate",
            google_cert.GoogleManagedCertificateArgs(
                hostname=entrance_config.hostname,
                name=cert_name,
                region=stack.region,
                project=stack.cluster.gcpProject,
            ),
        )
    entrance = Entrance(
        "entrance",
        EntranceArgs(
            hostname=entrance_config.hostname,
            namespace=stack.modelStore.namespace,
            implementation=implementation,
            cloud=stack.cloud.value,
            plans=[p for p in plans if p.model.engine == "vllm"],
            picker_replicas=entrance_config.picker.replicas,
            failure_mode=entrance_config.picker.failureMode,
            certificate=tls.certificate or default_certificate(implementation.name),
            acme_server=tls.acmeServer,
            acme_email=tls.acmeEmail,
            tls_secret=tls.secretName,
            google_certificate=google_certificate,
            crds=addons.crds,
            monitoring=monitoring.enabled,
            monitoring_labels=dict(monitoring.labels),
            system_node_selector={contract.LABEL_POOL: contract.SYSTEM_POOL} if stack.creates_cluster else None,
            implementation_ready=addons.ready.get("agentgateway", []),
            namespace_ready=[shared.namespace_resource],
            image_mirrors=cluster.image_mirrors,
        ),
        k8s_opts,
    )
    if entrance_config.reserved_hostname:
        warnings.append(
            f"exposure.entrance.hostname: {entrance_config.hostname} is a documentation domain; no CA "
            "issues a certificate for it and no client resolves it: set the host name you own"
        )
    pulumi.export("entrance", entrance.summary)
    endpoints = {
        "baseUrl": entrance.base_url,
        "models": entrance.models,
        "aliases": {alias: name for name, aliases in entrance.aliases.items() for alias in aliases},
        "gatewayAddress": entrance.address_command(stack.modelStore.namespace),
        "inCluster": endpoints,
    }

# After the servers and the entrance: a Job that checks every vLLM model against the plan's numbers;
# `pulumi up` waits for it and fails when a check fails (docs/verification.md).
if verify_targets:
    verification = Verification(
        "verification",
        VerificationArgs(
            namespace=stack.modelStore.namespace,
            targets=verify_targets,
            wait_for=servers + ([entrance] if entrance_config is not None else []),
            system_node_selector={contract.LABEL_POOL: contract.SYSTEM_POOL} if stack.creates_cluster else None,
            image_mirrors=cluster.image_mirrors,
        ),
        k8s_opts,
    )
    pulumi.export("verification", verification.summary)
# The cluster's exec kubeconfig (no credential in it) for `kubectl` in CI (the pulumi-up workflow
# prints the verification Job's log with it); an existing cluster has the user's own.
kubeconfig = getattr(cluster, "kubeconfig", None)
if kubeconfig is not None:
    pulumi.export("kubeconfig", kubeconfig)

# Where `pulumi up` of this stack runs from (deployer.runner, docs/deployer.md): the workflow's runs-on must match.
pulumi.export("deployer", deployer_summary(stack.deployer, stack.cluster.name or ""))
pulumi.export("sizing", plan.sizing_table(plans))
pulumi.export("pools", plan.pool_table(stack, plans))
# Network, NAT, node autoscaler, APIs: what the cluster layer built the pools on.
pulumi.export("platform", cluster.platform)
drivers = driver_check.driver_rows(stack, plans)
warnings += [
    f"{row['model']}: the NVIDIA driver on pool {row['pool']} ({row['driver']}) is {row['verdict']}"
    for row in drivers
    if row["verdict"].startswith("TOO OLD")
]
pulumi.export("drivers", drivers)
pulumi.export("warnings", warnings)
pulumi.export("addons", addon_table(addon_needs, stack.creates_cluster))
pulumi.export("endpoints", endpoints)
pulumi.export("revisions", {p.served_name: f"{p.repo}@{p.revision}" for p in plans})
# For autoscaling.kind hpa: the prometheus-adapter `rules.external` entries that turn the queue depth
# and the KV-cache usage into the external metrics the HPAs read (the same for every model;
# docs/autoscaling.md).
pulumi.export("prometheusAdapterRules", adapter_rules or None)
