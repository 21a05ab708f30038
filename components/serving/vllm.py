"""VllmServer: one model served by `vllm serve`, sized, probed, exposed, scaled and watched.

Stages 5-9 of the path for the vllm engine. Every number comes from the model's `ModelPlan`
(planner/plan.py) through small pure modules:
- components/serving/engine_args.py: the engine flags;
- components/serving/probes.py: startup/readiness/liveness probes, preStop and grace period;
- components/serving/resources.py: CPU, memory, /dev/shm, rollout strategy;
- components/serving/observability.py: ServiceMonitor and PrometheusRule (alerts.py, slo.py);
  dashboard.py: the Grafana dashboard; scaling.py: KEDA ScaledObject or HPA.

A replica that fits one node is a Deployment. A replica whose tensor × pipeline parallelism spans
nodes is a LeaderWorkerSet group: tensor parallelism inside each node, one pipeline stage per node,
the leader starts a Ray head and `vllm serve`, the workers join its Ray cluster, and the group is
recreated as a whole when any of its pods restarts (one lost stage makes the replica useless).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from common import contract, gpus, images, pod_security
from common.alerting import RUNBOOK_DOC
from common.engine import VLLM_VERSION
from components.addons import leader_worker_set
from components.addons.crd_sources import CrdSources, custom_resource
from components.cluster.interface import GpuPlacement, RdmaAttachment
from components.model_store.mirror import SCRIPT_NAME as MIRROR_SCRIPT_NAME
from components.serving import (
    alerts,
    api_key,
    dashboard,
    disruption,
    observability,
    probes,
    scaling,
    slo,
    targets,
    writable,
)
from components.serving import engine_args as vllm_args
from components.serving import resources as server_resources
from planner.plan import ModelPlan

CONTAINER_NAME = targets.SERVER_CONTAINER
COMPONENT_SERVER = "vllm-server"
COMPONENT_WORKER = "vllm-worker"
API_KEY_SECRET_KEY = api_key.SECRET_KEY
API_KEY_NEXT_SECRET_KEY = api_key.NEXT_SECRET_KEY
# The servers' start check (components/model_store/mirror/mirror.py verify, from the mirror's ConfigMap).
CHECK_CONTAINER = "verify-weights"
CHECK_SCRIPT_MOUNT = "/opt/llm-serving-mirror"
RAY_PORT = 6379
# Fixed (Ray picks a random one by default) so the worker pods' probes can check their raylet.
RAY_NODE_MANAGER_PORT = 6380
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
# Multus reads the secondary networks a pod joins from this annotation.
MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
# Environment LWS injects into every container of a group (sigs.k8s.io/lws api/leaderworkerset/v1
# leaderworkerset_types.go: LwsLeaderAddress, LwsGroupSize).
LWS_LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
LWS_GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
# The client Service's name suffix. The LWS controller creates a headless Service named exactly
# after the LeaderWorkerSet (LWS_LEADER_ADDRESS is <leader pod>.<lws name>.<namespace>), so a
# Service of our own with the workload's name would collide with it; Deployments use the same
# suffix so every model's API Service is named alike.
API_SERVICE_SUFFIX = "-api"
# Exit status 0 once the local Ray cluster has LWS_GROUP_SIZE live nodes (the head plus every
# worker pod); run by the leader before `vllm serve` (see PodBuilder.server_container).
RAY_GROUP_READY_CHECK = (
    'import os, ray; ray.init(address="auto", logging_level="ERROR"); '
    f'raise SystemExit(sum(n["Alive"] for n in ray.nodes()) < int(os.environ["{LWS_GROUP_SIZE_ENV}"]))'
)


@dataclass
class ServerStorage:
    """Where the weights come from, handed over by the model store (components/model_store/store.py)."""

    claim_name: pulumi.Input[str] | None = None
    """ReadWriteMany PVC holding <org>/<name>/<revision>/, mounted read-only at MODEL_MOUNT_PATH."""
    weights_uri: pulumi.Input[str] | None = None
    """s3:// or gs:// URI of this revision's folder; vLLM streams it with the Run:ai streamer."""
    service_account: pulumi.Input[str] | None = None
    """ServiceAccount allowed to read the bucket (EKS Pod Identity / GKE Workload Identity)."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The mirror Job (or anything else) that must finish before servers start."""
    check_script_config_map: pulumi.Input[str] | None = None
    """The ConfigMap holding the mirror script: with a mounted volume, an init container checks the
    files against the mirror's manifest before vLLM starts (models[].verifyAtStart)."""


@dataclass(frozen=True)
class GatewayExposure:
    """A Gateway API HTTPRoute in front of the Service."""

    name: str
    namespace: str
    hostname: str | None = None


@dataclass
class VllmServerArgs:
    plan: ModelPlan
    placement: GpuPlacement
    namespace: str
    storage: ServerStorage
    crds: CrdSources
    """Where each custom resource kind comes from (components/addons): every LeaderWorkerSet,
    HTTPRoute, ServiceMonitor, PrometheusRule and ScaledObject waits for it."""
    machine: gpus.CloudMachine | None = None
    """The pool's catalog machine (stack_config.pool_machine); None on an existing cluster."""
    api_key: pulumi.Input[str] | None = None
    """The API key (a Pulumi secret); stored in a Secret and read by vLLM from VLLM_API_KEY."""
    api_key_next: pulumi.Input[str] | None = None
    """A second key valid beside `api_key` during a rotation (a Pulumi secret, same Secret)."""
    allow_unauthenticated: bool = False
    """exposure.allowUnauthenticated: marks the pods with the waiver the policy pack accepts."""
    gateway: GatewayExposure | None = None
    update_strategy: server_resources.UpdateStrategy = "auto"
    monitoring: bool = True
    """Create the ServiceMonitor, PrometheusRule and dashboard (needs the Prometheus Operator CRDs)."""
    monitoring_labels: dict[str, str] = field(default_factory=dict)
    """Labels the Prometheus' serviceMonitorSelector / ruleSelector match (e.g. release: kube-prometheus-stack)."""
    dashboard_namespace: str | None = None
    alert_thresholds: alerts.AlertThresholds | None = None
    runbook_url: str = RUNBOOK_DOC
    """Where the alerts' runbook_url annotations point (monitoring.runbookUrl)."""
    rdma: RdmaAttachment | None = None
    image_mirrors: dict[str, str] = field(default_factory=dict)
    """images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors)."""
    """The Network Operator's RDMA devices and network; used only by replicas that span nodes."""


def _labels(plan: ModelPlan, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": plan.served_name,
        contract.LABEL_PART_OF: contract.PART_OF,
        contract.LABEL_MODEL: plan.served_name,
        contract.LABEL_COMPONENT: component,
    }


def selector_labels(plan: ModelPlan, component: str = COMPONENT_SERVER) -> dict[str, str]:
    # Immutable selectors: model and role only, never the revision (a new revision is a rollout).
    return {contract.LABEL_MODEL: plan.served_name, contract.LABEL_COMPONENT: component}


def workload_annotations(plan: ModelPlan) -> dict[str, str]:
    return {
        contract.ANNOTATION_LOAD_SECONDS: str(round(plan.load_seconds)),
        contract.ANNOTATION_REPO: plan.repo,
        contract.ANNOTATION_ENGINE_VERSION: VLLM_VERSION,
    }


def rollout_deadline_seconds(plan: ModelPlan) -> int:
    """The plan's rollout deadline (planner/plan.py decides it): the Deployment's
    progressDeadlineSeconds, including a node's provisioning when the pool may have to grow for the
    pods; `pulumi up` waits `plan.server_wait_seconds`, a minute longer."""
    return plan.rollout_deadline_seconds


def api_service_name(plan: ModelPlan) -> str:
    return f"{plan.served_name}{API_SERVICE_SUFFIX}"


class PodBuilder:
    """Builds the pod templates of one server from the plan and its inputs (pure dicts)."""

    def __init__(
        self,
        args: VllmServerArgs,
        api_key_secret: pulumi.Input[str] | None,
        chat_template_config_map: pulumi.Input[str] | None,
    ):
        self.args = args
        self.plan = args.plan
        self.api_key_secret = api_key_secret
        self.chat_template_config_map = chat_template_config_map
        self.probe_plan = probes.probe_plan(self.plan)
        self.resources = server_resources.pod_resources(self.plan, args.machine)

    @property
    def rotating(self) -> bool:
        """Two keys valid at once (apiKeyNext set): vLLM gets both with --api-key."""
        return self.api_key_secret is not None and self.args.api_key_next is not None

    @property
    def multi_node(self) -> bool:
        return self.plan.nodes_per_replica > 1

    def env(self) -> list[dict[str, Any]]:
        env: list[dict[str, Any]] = [
            # Servers never call the Hub: the weights, config and tokenizer are already local (or in
            # the bucket), and a surprise download at start-up is an outage.
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            # No usage telemetry from inside a customer cluster.
            {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
            {"name": "DO_NOT_TRACK", "value": "1"},
            # Non-root on a read-only root filesystem: caches and temp files go to emptyDirs.
            *writable.env(),
        ]
        if self.api_key_secret is not None:
            env += api_key.env(self.api_key_secret, self.rotating)
        if self.rdma is not None:
            env += [{"name": key, "value": value} for key, value in self.rdma.env]
        return env

    def volumes(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        volumes: list[dict[str, Any]] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{self.resources.shm_gib}Gi"}},
        ]
        mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        volumes += writable.volumes()
        mounts += writable.mounts()
        claim = self.args.storage.claim_name
        if claim is not None and self.args.storage.weights_uri is None:
            volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
            mounts.append({"name": "models", "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": True})
        if self.chat_template_config_map is not None:
            volumes.append({"name": "chat-template", "configMap": {"name": self.chat_template_config_map}})
            mounts.append({"name": "chat-template", "mountPath": vllm_args.CHAT_TEMPLATE_DIR, "readOnly": True})
        return volumes, mounts

    def serve_argv(self) -> list[Any]:
        return [
            *vllm_args.serve_args(self.plan, weights_uri=self.args.storage.weights_uri),
            *vllm_args.api_key_args(self.rotating),
        ]

    def server_container(self) -> dict[str, Any]:
        _, mounts = self.volumes()
        pp = self.probe_plan
        container: dict[str, Any] = {
            "name": CONTAINER_NAME,
            "image": images.mirrored(self.plan.model.image, self.args.image_mirrors),
            "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": probes.PORT_NAME, "containerPort": contract.SERVER_PORT, "protocol": "TCP"}],
            "env": self.env(),
            "resources": self.container_resources(),
            "volumeMounts": mounts,
            "startupProbe": pp.startup_probe(),
            "readinessProbe": pp.readiness_probe(),
            "livenessProbe": pp.liveness_probe(),
            "lifecycle": pp.lifecycle(),
            "securityContext": pod_security.container_security_context(),
        }
        if self.multi_node:
            # Start the Ray head, wait until every worker pod of the group has joined (their nodes
            # may still be launching), then start the engine. The wait is explicit so that the log
            # says what the leader waits for, and the startup budget carries an allowance for it
            # (plan.worker_wait_seconds). The flags stay a plain list passed as "$@", so no flag is
            # ever re-quoted by a shell.
            script = (
                f"ray start --head --port={RAY_PORT} --disable-usage-stats --include-dashboard=false"
                f" && until python3 -c '{RAY_GROUP_READY_CHECK}' >/dev/null 2>&1;"
                f' do echo "waiting for ${LWS_GROUP_SIZE_ENV} Ray nodes"; sleep 5; done'
                f' && exec {" ".join(vllm_args.SERVE_COMMAND)} "$@"'
            )
            container["command"] = ["/bin/sh", "-c", script, "vllm-leader"]
        else:
            container["command"] = list(vllm_args.SERVE_COMMAND)
        container["args"] = self.serve_argv()
        return container

    def worker_container(self) -> dict[str, Any]:
        _, mounts = self.volumes()
        address = f"${LWS_LEADER_ADDRESS_ENV}:{RAY_PORT}"
        script = (
            f"until ray health-check --address {address} >/dev/null 2>&1; do sleep 5; done"
            f" && exec ray start --address={address} --node-manager-port={RAY_NODE_MANAGER_PORT}"
            " --disable-usage-stats --block"
        )
        # A worker serves no HTTP: its probes check that its raylet listens. The startup budget is
        # the leader's (the worker joins once the leader's Ray head is up, then loads its stage).
        raylet = {"tcpSocket": {"port": "ray-node"}}
        pp = self.probe_plan
        return {
            "name": CONTAINER_NAME,
            "image": images.mirrored(self.plan.model.image, self.args.image_mirrors),
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", script],
            "ports": [{"name": "ray-node", "containerPort": RAY_NODE_MANAGER_PORT, "protocol": "TCP"}],
            "env": [e for e in self.env() if e["name"] not in (vllm_args.API_KEY_ENV, vllm_args.API_KEY_NEXT_ENV)],
            "resources": self.container_resources(),
            "volumeMounts": mounts,
            "startupProbe": pp.startup_probe(raylet),
            "readinessProbe": pp.readiness_probe(raylet),
            "livenessProbe": pp.liveness_probe(raylet),
            "securityContext": pod_security.container_security_context(),
        }

    @property
    def checks_weights(self) -> bool:
        """A mounted model volume and the mirror's script: the files are checked before vLLM starts."""
        storage = self.args.storage
        return (
            storage.check_script_config_map is not None
            and storage.claim_name is not None
            and storage.weights_uri is None
        )

    def check_container(self) -> dict[str, Any]:
        """Compare the mirrored folder with the manifest the mirror Job wrote (sizes, or every byte).

        A missing manifest fails too: the mirror writes it last, and with a signature only after the
        signature held, so a folder without one was never completely verified.
        """
        mode = self.plan.model.verifyAtStart
        return {
            "name": CHECK_CONTAINER,
            # The engine image has python3 and is on the node already; the script needs only the
            # standard library for `verify`.
            "image": images.mirrored(self.plan.model.image, self.args.image_mirrors),
            "imagePullPolicy": "IfNotPresent",
            "command": [
                "python3",
                f"{CHECK_SCRIPT_MOUNT}/{MIRROR_SCRIPT_NAME}",
                "verify",
                "--local-dir",
                self.plan.model_path,
                *(["--sizes-only"] if mode == "sizes" else []),
            ],
            # It only reads: no bytecode cache to write on the read-only root.
            "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
            "resources": {
                "requests": {"cpu": "1" if mode == "sha256" else "100m", "memory": "256Mi"},
                "limits": {"memory": "512Mi"},
            },
            "volumeMounts": [
                {"name": "models", "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": True},
                {"name": "weights-check", "mountPath": CHECK_SCRIPT_MOUNT, "readOnly": True},
            ],
            "securityContext": pod_security.container_security_context(),
        }

    def pod_spec(self, container: dict[str, Any], component: str) -> dict[str, Any]:
        volumes, _ = self.volumes()
        placement = self.args.placement
        spec: dict[str, Any] = {
            "containers": [container],
            "volumes": volumes,
            "nodeSelector": placement.node_selector,
            "tolerations": placement.tolerations,
            "terminationGracePeriodSeconds": self.probe_plan.termination_grace_period_seconds,
            # Hundreds of Service env vars are noise to the engine.
            "enableServiceLinks": False,
            # The server never calls the Kubernetes API (the bucket identity is the cloud's: EKS Pod
            # Identity and GKE Workload Identity do not read this token); the reader ServiceAccount
            # says the same, this makes it hold whichever account the pod runs as.
            "automountServiceAccountToken": False,
            # Non-root with a fixed uid: GPUs need no root (the NVIDIA device nodes the toolkit
            # injects are world read-write, mode 0666 by default), the weights are world-readable.
            "securityContext": pod_security.pod_security_context(),
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    # ScheduleAnyway: spread replicas for availability, but never leave one Pending just
                    # because the only free GPUs sit on a node that already runs a replica.
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": selector_labels(self.plan, component)},
                }
            ],
        }
        if self.args.storage.service_account is not None:
            spec["serviceAccountName"] = self.args.storage.service_account
        if component == COMPONENT_SERVER and self.checks_weights:
            # The leader (or every Deployment pod) checks; a group's workers read the same volume.
            spec["initContainers"] = [self.check_container()]
            spec["volumes"] = [
                *volumes,
                {
                    "name": "weights-check",
                    "configMap": {"name": self.args.storage.check_script_config_map, "defaultMode": 0o555},
                },
            ]
        return spec

    @property
    def rdma(self) -> RdmaAttachment | None:
        # Inside one node NCCL uses NVLink/PCIe; the fabric matters only between the pods of a group.
        return self.args.rdma if self.multi_node else None

    def container_resources(self) -> dict[str, Any]:
        resources = self.resources.requirements(contract.GPU_RESOURCE)
        if self.rdma is not None:
            for side in ("requests", "limits"):
                resources[side][self.rdma.resource] = str(self.rdma.count)
        return resources

    def template(self, container: dict[str, Any], component: str) -> dict[str, Any]:
        labels = {**_labels(self.plan, component), contract.LABEL_REVISION: self.plan.revision}
        # Pod-only: Karpenter reads it from pods, and a server pod must keep its node mid-stream.
        annotations = {**workload_annotations(self.plan), contract.ANNOTATION_DO_NOT_DISRUPT: "true"}
        if self.args.allow_unauthenticated:
            annotations[contract.ANNOTATION_ALLOW_UNAUTHENTICATED] = "true"
        if self.rdma is not None and self.rdma.network:
            annotations = {**annotations, MULTUS_NETWORKS_ANNOTATION: self.rdma.network}
        return {
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": self.pod_spec(container, component),
        }


def deployment_manifest(
    name: str, args: VllmServerArgs, pods: PodBuilder, replicas: int, strategy: str
) -> dict[str, Any]:
    plan = args.plan
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": selector_labels(plan)},
        "template": pods.template(pods.server_container(), COMPONENT_SERVER),
        # A model takes minutes to load; the default 600 s deadline would mark healthy rollouts failed.
        "progressDeadlineSeconds": rollout_deadline_seconds(plan),
    }
    if strategy == "RollingUpdate":
        spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    else:
        spec["strategy"] = {"type": "Recreate"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name, args, COMPONENT_SERVER),
        "spec": spec,
    }


def leader_worker_set_manifest(
    name: str, args: VllmServerArgs, pods: PodBuilder, replicas: int, strategy: str
) -> dict[str, Any]:
    plan = args.plan
    rollout: dict[str, Any] = {"type": "RollingUpdate"}
    # LWS rolls whole groups; "Recreate" maps to replacing every group at once (all unavailable).
    rollout["rollingUpdateConfiguration"] = (
        {"maxUnavailable": 0, "maxSurge": 1}
        if strategy == "RollingUpdate"
        else {"maxUnavailable": replicas, "maxSurge": 0}
    )
    metadata = _metadata(name, args, COMPONENT_SERVER)
    # Without it `pulumi up` would report the LeaderWorkerSet created the moment the API server
    # accepts it, long before any group runs, and its customTimeouts would bound nothing.
    metadata["annotations"][contract.PULUMI_WAIT_FOR] = leader_worker_set.READY
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": rollout,
            "leaderWorkerTemplate": {
                "size": plan.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pods.template(pods.server_container(), COMPONENT_SERVER),
                "workerTemplate": pods.template(pods.worker_container(), COMPONENT_WORKER),
            },
        },
    }


def service_manifest(name: str, args: VllmServerArgs) -> dict[str, Any]:
    metadata = _metadata(name, args, COMPONENT_SERVER, annotations=False)
    # The provider would otherwise hold the Service until a ready pod backs it, for at most its
    # default 10 minutes (pulumi-kubernetes provider/pkg/await/service.go), while the pods wait for
    # the mirror and a model load that take far longer. The workload's own wait owns readiness.
    metadata["annotations"] = {contract.PULUMI_SKIP_AWAIT: "true"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "ClusterIP",
            # Only the leader of a group (or every Deployment pod) serves HTTP, /v1 and /metrics.
            "selector": selector_labels(args.plan),
            "ports": [
                {
                    "name": probes.PORT_NAME,
                    "port": contract.SERVER_PORT,
                    "targetPort": probes.PORT_NAME,
                    "protocol": "TCP",
                    "appProtocol": "http",
                }
            ],
        },
    }


def pod_disruption_budget_manifest(name: str, args: VllmServerArgs) -> dict[str, Any]:
    # All pods of the model (leaders and workers): evicting any pod of a group takes the group down,
    # so one pod at a time means at most one replica at a time.
    return disruption.model_disruption_budget(
        _metadata(name, args, COMPONENT_SERVER, annotations=False), args.plan.served_name
    )


# What a Gateway forwards of one model's server: the OpenAI API and the health check, never
# /metrics (it is unauthenticated and says who uses the model how much).
ROUTED_PATHS = ("/v1", probes.HEALTH_PATH)


def route_prefix(plan: ModelPlan) -> str:
    """Every model shares the Gateway and hostname; its served name in the path tells them apart."""
    return f"/{plan.served_name}"


def http_route_manifest(name: str, args: VllmServerArgs, service_name: str) -> dict[str, Any]:
    gw = args.gateway
    assert gw is not None
    prefix = route_prefix(args.plan)
    # One rule per path: Gateway API allows a ReplacePrefixMatch rewrite only on a rule with exactly
    # one PathPrefix match (CEL rule on HTTPRoute .spec.rules). /<model>/v1/chat/completions reaches
    # the server as /v1/chat/completions; PathPrefix matches whole path segments, so /<model>/v1x
    # and /<model>/metrics match nothing.
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": f"{prefix}{path}"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": path}},
                }
            ],
            "backendRefs": [{"name": service_name, "port": contract.SERVER_PORT}],
            # A streamed answer may legitimately last as long as the server's drain allowance; a
            # gateway default (often 15-60 s) would cut long generations.
            "timeouts": {"request": f"{probes.drain_seconds(args.plan)}s"},
        }
        for path in ROUTED_PATHS
    ]
    spec: dict[str, Any] = {
        "parentRefs": [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw.name, "namespace": gw.namespace}
        ],
        "rules": rules,
    }
    if gw.hostname:
        spec["hostnames"] = [gw.hostname]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _metadata(name, args, COMPONENT_SERVER, annotations=False),
        "spec": spec,
    }


def _metadata(name: str, args: VllmServerArgs, component: str, annotations: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": args.namespace,
        "labels": {**_labels(args.plan, component), contract.LABEL_REVISION: args.plan.revision},
    }
    if annotations:
        meta["annotations"] = workload_annotations(args.plan)
    return meta


def observability_target(name: str, args: VllmServerArgs) -> targets.Target:
    plan = args.plan
    return targets.Target(
        served_name=plan.served_name,
        namespace=args.namespace,
        workload_name=name,
        load_seconds=plan.load_seconds,
        startup_budget_seconds=plan.startup_budget_seconds,
        labels=_labels(plan, COMPONENT_SERVER),
        workload_kind=targets.LEADER_WORKER_SET if plan.nodes_per_replica > 1 else targets.DEPLOYMENT,
        ready_deadline_seconds=rollout_deadline_seconds(plan),
    )


class VllmServer(pulumi.ComponentResource):
    """One model's vLLM server: workload, Service, optional route, PDB, monitoring and autoscaling."""

    service_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    """Where clients reach the OpenAI API: https://<gateway hostname>/<model>/v1 behind a Gateway with
    a hostname, else the Service's in-cluster URL."""
    internal_endpoint: pulumi.Output[str]
    workload_kind: str
    warnings: list[str]
    prometheus_adapter_rules: list[dict[str, Any]]
    """With autoscaling kind hpa: the prometheus-adapter `rules.external` entries the HPA's metrics
    need (docs/autoscaling.md); [] otherwise. Identical for every model, so export them once."""

    def __init__(self, name: str, args: VllmServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:VllmServer", name, None, opts)
        plan = args.plan
        if args.storage.claim_name is None and args.storage.weights_uri is None:
            raise ValueError(
                f"VllmServer {name}: ServerStorage needs claim_name (volume) or weights_uri (bucket); "
                "pass what the model store created"
            )
        child = pulumi.ResourceOptions(parent=self)
        k8s_name = plan.served_name
        self.warnings = vllm_args.plan_warnings(plan)

        api_key_secret = None
        if args.api_key is not None:
            secret = api_key.secret(
                name, k8s_name, args.namespace, _labels(plan, COMPONENT_SERVER), args.api_key, args.api_key_next, child
            )
            api_key_secret = secret.metadata.apply(lambda m: m["name"])

        template_cm = None
        if vllm_args.needs_chat_template_file(plan):
            cm = k8s.core.v1.ConfigMap(
                f"{name}-chat-template",
                metadata={
                    "name": f"{k8s_name}-chat-template",
                    "namespace": args.namespace,
                    "labels": _labels(plan, COMPONENT_SERVER),
                },
                data={vllm_args.CHAT_TEMPLATE_FILE: plan.model.chatTemplate},
                opts=child,
            )
            template_cm = cm.metadata.apply(lambda m: m["name"])

        # The Secret's name (None without an API key): the verification Job reads the key from it.
        self.api_key_secret_name = api_key_secret
        pods = PodBuilder(args, api_key_secret, template_cm)
        if pods.resources.capped_by_node:
            self.warnings.append(
                f"models[{plan.index}]: one node of pool {plan.pool.name} can give {plan.served_name} only "
                f"{pods.resources.memory_limit_gib} GiB of memory, less than its weights plus the engine need; "
                "loading may be OOM-killed; set pools[].machineType to a machine with more memory"
            )
        replicas, most = plan.replica_bounds
        strategy = server_resources.update_strategy(plan, args.update_strategy)
        # The autoscaler owns the replica count once it exists; Pulumi must not reset it on each update.
        autoscaled = plan.model.autoscaling.enabled
        workload_opts = pulumi.ResourceOptions(
            parent=self,
            depends_on=list(args.storage.depends_on),
            ignore_changes=["spec.replicas"] if autoscaled else None,
            custom_timeouts=pulumi.CustomTimeouts(
                create=f"{plan.server_wait_seconds}s", update=f"{plan.server_wait_seconds}s"
            ),
        )
        if pods.multi_node:
            self.workload_kind = "LeaderWorkerSet"
            manifest = leader_worker_set_manifest(k8s_name, args, pods, replicas, strategy)
            workload = custom_resource(f"{name}-lws", manifest, args.crds, workload_opts)
            target_ref = {"apiVersion": LWS_API_VERSION, "kind": "LeaderWorkerSet", "name": k8s_name}
        else:
            self.workload_kind = "Deployment"
            manifest = deployment_manifest(k8s_name, args, pods, replicas, strategy)
            workload = k8s.apps.v1.Deployment(
                f"{name}-deployment",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=workload_opts,
            )
            target_ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": k8s_name}

        svc = service_manifest(api_service_name(plan), args)
        service = k8s.core.v1.Service(f"{name}-service", metadata=svc["metadata"], spec=svc["spec"], opts=child)
        self.service_name = service.metadata.apply(lambda m: m["name"])
        self.internal_endpoint = pulumi.Output.format(
            "http://{0}.{1}.svc.cluster.local:{2}/v1", self.service_name, args.namespace, contract.SERVER_PORT
        )
        self.endpoint = self.internal_endpoint
        if args.gateway is not None and args.gateway.hostname:
            self.endpoint = pulumi.Output.from_input(f"https://{args.gateway.hostname}{route_prefix(plan)}/v1")

        if args.gateway is not None:
            route = http_route_manifest(k8s_name, args, api_service_name(plan))
            custom_resource(
                f"{name}-route", route, args.crds, pulumi.ResourceOptions(parent=self, depends_on=[service])
            )

        if most > 1:
            pdb = pod_disruption_budget_manifest(k8s_name, args)
            k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child)

        target = observability_target(k8s_name, args)
        a = plan.model.autoscaling
        scale_at = scaling.ScalingTargets.of_model(a)
        # The backlog alert fires at the same per-replica queue the autoscaler scales on.
        thresholds = dataclasses.replace(
            args.alert_thresholds or alerts.AlertThresholds(), queue_per_replica=a.queueThreshold
        )
        objectives = slo.latency_slos(plan.model.slo)
        if args.monitoring:
            sm = observability.service_monitor(k8s_name, target, selector_labels(plan), args.monitoring_labels)
            custom_resource(f"{name}-servicemonitor", sm, args.crds, child)
            rule = observability.prometheus_rule(
                k8s_name, target, thresholds, objectives, args.runbook_url, args.monitoring_labels
            )
            custom_resource(f"{name}-alerts", rule, args.crds, child)
            board = dashboard.dashboard_config_map(
                f"{k8s_name}-dashboard", target, objectives, args.dashboard_namespace
            )
            k8s.core.v1.ConfigMap(f"{name}-dashboard", metadata=board["metadata"], data=board["data"], opts=child)

        self.prometheus_adapter_rules = scaling.prometheus_adapter_rules() if a.enabled and a.kind == "hpa" else []
        if a.enabled:
            scale_opts = pulumi.ResourceOptions(parent=self, depends_on=[workload])
            if a.kind == "keda":
                so = scaling.scaled_object(
                    k8s_name,
                    target,
                    target_ref,
                    min_replicas=replicas,
                    max_replicas=most,
                    scale_at=scale_at,
                    prometheus_url=a.prometheusUrl,
                )
                custom_resource(f"{name}-scaledobject", so, args.crds, scale_opts)
            else:
                hpa = scaling.horizontal_pod_autoscaler(
                    k8s_name,
                    target,
                    target_ref,
                    min_replicas=replicas,
                    max_replicas=most,
                    scale_at=scale_at,
                )
                k8s.autoscaling.v2.HorizontalPodAutoscaler(
                    f"{name}-hpa",
                    metadata=hpa["metadata"],
                    spec=hpa["spec"],
                    opts=scale_opts,
                )

        self.register_outputs(
            {
                "serviceName": self.service_name,
                "endpoint": self.endpoint,
                "internalEndpoint": self.internal_endpoint,
                "workloadKind": self.workload_kind,
                "warnings": self.warnings,
                "prometheusAdapterRules": self.prometheus_adapter_rules,
            }
        )
