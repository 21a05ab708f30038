"""What the monitoring of one served model selects: its series and its pods.

vLLM 0.32 labels its series with `model_name` = the served model name (vllm/v1/metrics/loggers.py:
labelnames ["model_name", "engine"]); the Prometheus Operator adds `namespace` and `pod` from the
scrape target, so each engine query selects one model in one namespace. kube-state-metrics and the
DCGM exporter (with the GPU Operator's Kubernetes mapping) label by `namespace` and `pod`, so those
queries select the model's pods by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The vLLM container's name in a model's pods (the restart counter is per container).
SERVER_CONTAINER = "vllm"

# Pod names per workload kind, as anchored regexes (PromQL anchors =~ at both ends), so that one
# model's queries never select another model whose name merely starts with this one's:
# - Deployment pods are <deployment>-<pod-template-hash>-<5 random characters> (the hash is 1-10
#   characters and the suffix 5, both from Kubernetes' safe alphabet, which has no '-').
# - LeaderWorkerSet leaders are <lws>-<group index>, workers <lws>-<group index>-<worker index>
#   (sigs.k8s.io/lws pod naming; the leader's name is LWS_LEADER_ADDRESS's first label).
DEPLOYMENT = "Deployment"
LEADER_WORKER_SET = "LeaderWorkerSet"


@dataclass(frozen=True)
class PodSet:
    """Pods that answer users, as a kube-state-metrics selector: what an availability alert watches.

    A model's serving pods are one (`Target.serving_pods`); any other component on the request
    path (the endpoint picker of the routing layer, for one) gets an availability alert by giving
    its own PodSet to `components.serving.alerts.no_ready_pods_alert`.
    """

    description: str
    """Words for the alert text, e.g. "model llama-3-1-8b-instruct"."""
    namespace: str
    pod_regex: str
    """Anchored by PromQL; DNS-label names need no escaping."""
    ready_deadline_seconds: int
    """How long a new pod may take to turn ready (image pull, start-up) before "none ready" is an outage."""

    @property
    def selector(self) -> str:
        return f'namespace="{self.namespace}", pod=~"{self.pod_regex}"'


@dataclass(frozen=True)
class Target:
    """What the queries select: one served model in one namespace, and its pods."""

    served_name: str
    namespace: str
    # The workload's name; its pods' names start with it (see the regexes above).
    workload_name: str
    # Seconds from container start to /health (plan.load_seconds) and the startup probe budget.
    load_seconds: float
    startup_budget_seconds: int
    labels: dict[str, str] = field(default_factory=dict)
    workload_kind: str = DEPLOYMENT
    # How long a rollout may take before a replica must be ready (the workload's progress deadline);
    # default: the startup budget.
    ready_deadline_seconds: int | None = None
    # The engine's container in the pods (restart counts are per container): `vllm` on the vLLM
    # path, the runtime's `kserve-container` on the KServe path.
    container: str = SERVER_CONTAINER

    @property
    def selector(self) -> str:
        return f'model_name="{self.served_name}", namespace="{self.namespace}"'

    def _pods(self, regex: str) -> str:
        # Workload names are DNS labels ([-a-z0-9]): no regex metacharacter to escape.
        return f'namespace="{self.namespace}", pod=~"{self.workload_name}-{regex}"'

    @property
    def _pod_regex(self) -> str:
        if self.workload_kind == LEADER_WORKER_SET:
            return "[0-9]+(-[0-9]+)?"
        return "[a-z0-9]{1,10}-[a-z0-9]{5}"

    @property
    def _serving_pod_regex(self) -> str:
        return "[0-9]+" if self.workload_kind == LEADER_WORKER_SET else self._pod_regex

    @property
    def pod_selector(self) -> str:
        """Every pod of the workload (for a LeaderWorkerSet, leaders and workers)."""
        return self._pods(self._pod_regex)

    @property
    def serving_pod_selector(self) -> str:
        """The pods that serve HTTP and turn ready: Deployment pods, or LeaderWorkerSet leaders."""
        return self._pods(self._serving_pod_regex)

    @property
    def serving_pods(self) -> PodSet:
        return PodSet(
            description=f"model {self.served_name}",
            namespace=self.namespace,
            pod_regex=f"{self.workload_name}-{self._serving_pod_regex}",
            ready_deadline_seconds=self.ready_deadline_seconds or self.startup_budget_seconds,
        )
