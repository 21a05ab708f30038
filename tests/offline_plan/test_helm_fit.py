"""Where the rendered add-on pods can schedule on the stack's pools, and whether the system pool
holds them (offline_plan/helm: pools, placement, machines, fit, fit_report)."""

from __future__ import annotations

import copy
import functools
import json

import pytest

from common import contract
from components.cluster.aws import karpenter
from components.entrance import picker
from offline_plan import helm
from offline_plan.helm import fit, machines, placement, pools
from offline_plan.helm.engine import RenderedRelease
from offline_plan.helm.fit_report import PROGRAM, report
from offline_plan.helm.operands import operand_summaries
from offline_plan.helm.pods import summaries
from offline_plan.helm.releases import Release
from offline_plan.mock_runtime import Evaluation, evaluate_stack, stack_file_config
from tests.support.committed import committed_stack
from tests.support.stack_variants import EXISTING, variant

MIB = 2**20
GPU_TAINT = f"{contract.GPU_TAINT_KEY}=present:{contract.GPU_TAINT_EFFECT}"


@functools.cache
def _report(stack: str) -> tuple[Evaluation, helm.Report]:
    evaluation = committed_stack(stack)
    return evaluation, helm.placement_report(evaluation)


# --- The committed stacks: every number reasoned from the charts' and the program's values -----

# What lands on the system pool of both stacks, with the requests the chart values (charts/<chart>/
# values.yaml at the pinned versions) or the program set: (replicas, CPU cores, memory MiB).
GPU_OPERATOR = {
    # gpu-operator v26.7.0 values.yaml `operator.resources.requests` 200m / 100Mi.
    "gpu-operator/gpu-operator Deployment/gpu-operator": (1, 0.2, 100),
    # Its node-feature-discovery subchart: master 100m / 128Mi, gc 10m / 128Mi.
    "gpu-operator/gpu-operator Deployment/gpu-operator-node-feature-discovery-master": (1, 0.1, 128),
    "gpu-operator/gpu-operator Deployment/gpu-operator-node-feature-discovery-gc": (1, 0.01, 128),
}
# kube-prometheus-stack 88.3.0 sets no requests for these (the chart's defaults are empty).
PROMETHEUS_STACK = {
    "monitoring/kube-prometheus-stack Deployment/kube-prometheus-stack-grafana": (1, 0.0, 0),
    "monitoring/kube-prometheus-stack Deployment/kube-prometheus-stack-kube-state-metrics": (1, 0.0, 0),
    "monitoring/kube-prometheus-stack Deployment/kube-prometheus-stack-operator": (1, 0.0, 0),
    # The operator's pods for the Prometheus and Alertmanager it renders: one replica each, no
    # resources set, and the chart passes --config-reloader-*-request=0 for the sidecar.
    "monitoring/kube-prometheus-stack Prometheus/kube-prometheus-stack-prometheus": (1, 0.0, 0),
    "monitoring/kube-prometheus-stack Alertmanager/kube-prometheus-stack-alertmanager": (1, 0.0, 0),
}
EPP_CPU = float(picker.RESOURCES["requests"]["cpu"])
EPP_MIB = 1024 if picker.RESOURCES["requests"]["memory"] == "1Gi" else -1


def _epp(model: str) -> dict[str, tuple[int, float, int]]:
    # The picker values: 2 replicas (exposure.entrance.picker.replicas) of 1 CPU / 1 GiB.
    return {f"llm-serving/{model} Deployment/{model}-epp": (2, EPP_CPU, EPP_MIB)}


DEV_REPLICATED = {**GPU_OPERATOR, **PROMETHEUS_STACK, **_epp("llama-3-1-8b-instruct")}
PROD_REPLICATED = {
    **GPU_OPERATOR,
    **PROMETHEUS_STACK,
    **_epp("llama-3-1-8b-instruct"),
    **_epp("llama-3-3-70b-instruct"),
    # agentgateway v1.4.1 controller: 100m / 128Mi (its values.yaml).
    "agentgateway-system/agentgateway Deployment/agentgateway": (1, 0.1, 128),
    # cert-manager v1.21.1 sets no requests.
    "cert-manager/cert-manager Deployment/cert-manager": (1, 0.0, 0),
    "cert-manager/cert-manager Deployment/cert-manager-cainjector": (1, 0.0, 0),
    "cert-manager/cert-manager Deployment/cert-manager-webhook": (1, 0.0, 0),
    # keda 2.20.2: operator, metrics server and webhooks at 100m / 100Mi each (values.yaml:553-570).
    "keda/keda Deployment/keda-operator": (1, 0.1, 100),
    "keda/keda Deployment/keda-operator-metrics-apiserver": (1, 0.1, 100),
    "keda/keda Deployment/keda-admission-webhooks": (1, 0.1, 100),
    # The program's Karpenter controller sizing, on two replicas.
    "kube-system/karpenter Deployment/karpenter": (2, float(karpenter.CONTROLLER_RESOURCES["requests"]["cpu"]), 1024),
}
# On every node that does not refuse them: NFD's worker (5m / 64Mi) and node-exporter (no requests).
DAEMONSETS = {
    "gpu-operator/gpu-operator DaemonSet/gpu-operator-node-feature-discovery-worker": (0.005, 64),
    "monitoring/kube-prometheus-stack DaemonSet/kube-prometheus-stack-prometheus-node-exporter": (0.0, 0),
}


def _sum(parts: dict[str, tuple[int, float, int]]) -> tuple[int, float, float]:
    return (
        sum(n for n, _, _ in parts.values()),
        sum(n * cpu for n, cpu, _ in parts.values()),
        sum(n * mib for n, _, mib in parts.values()) * MIB,
    )


def _reasoned_allocatable(cloud: str, vcpus: int, memory_gib: int, max_pods: int) -> tuple[float, float]:
    # CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above four.
    cpu = vcpus - (0.06 + 0.01 * (vcpus >= 2) + 0.005 * min(max(vcpus - 2, 0), 2) + 0.0025 * max(vcpus - 4, 0))
    if cloud == "aws":  # nodeadm: 11 MiB per pod + 255 MiB, and 100 MiB for eviction
        return cpu, (memory_gib * 1024 - (11 * max_pods + 255) - 100) * MIB
    # GKE's table for 4 < memory <= 128 GiB: 1 GiB + 0.8 + 0.8 + 6% of the rest above 16, 100 MiB eviction.
    reserved_gib = 1 + 0.8 + 0.8 + 0.06 * (memory_gib - 16)
    return cpu, (memory_gib - reserved_gib) * 1024**3 - 100 * MIB


@pytest.mark.parametrize(
    "stack, cloud, machine, vcpus, gib, max_pods, replicated, nodes",
    [
        # dev: 2.31 CPU of replicas on 7.91-CPU nodes, no anti-affinity: one node.
        ("dev", "gcp", "e2-standard-8", 8, 32, 110, DEV_REPLICATED, 1),
        # prod: 6.71 CPU would pack onto one 7.91-CPU node, but Karpenter's two replicas carry a
        # required anti-affinity on kubernetes.io/hostname (karpenter chart values.yaml:100-102): two.
        # m6i.2xlarge: 4 ENIs x (15 IPv4 - 1) + 2 = 58 pods (nodeadm instance-info.jsonl).
        ("prod", "aws", "m6i.2xlarge", 8, 32, 58, PROD_REPLICATED, 2),
    ],
)
def test_the_committed_stacks_get_a_fit_verdict_on_their_system_pool(
    stack, cloud, machine, vcpus, gib, max_pods, replicated, nodes
):
    _, result = _report(stack)
    result_fit = result.fit
    assert result_fit is not None and result_fit.pool.machine_type == machine
    assert (result_fit.pool.min_nodes, result_fit.pool.max_nodes) == (2, 4)  # SystemPoolConfig's defaults
    cpu, memory = _reasoned_allocatable(cloud, vcpus, gib, max_pods)
    assert result_fit.node is not None
    assert result_fit.node.cpu == pytest.approx(cpu) and result_fit.node.memory == pytest.approx(memory)
    assert result_fit.node.pods == max_pods
    replicas = {k for k, v in result.placements.items() if any(p.startswith("system ") for p in v)}
    assert set(replicated) <= replicas
    pods, cpu_sum, memory_sum = _sum(replicated)
    assert result_fit.replicated.pods == pods
    assert result_fit.replicated.cpu == pytest.approx(cpu_sum)
    assert result_fit.replicated.memory == pytest.approx(memory_sum)
    assert result_fit.per_node.cpu == pytest.approx(sum(c for c, _ in DAEMONSETS.values()))
    assert result_fit.per_node.memory == pytest.approx(sum(m for _, m in DAEMONSETS.values()) * MIB)
    assert result_fit.nodes == nodes and result_fit.fits and not result_fit.warnings
    section = "\n".join(helm.plan_section(committed_stack(stack)))
    assert f"**fits on {nodes} node" in section and "### Placement and fit on the stack's pools" in section


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_pod_of_the_committed_stacks_can_schedule_and_gpu_pods_only_on_gpu_pools(stack):
    evaluation, result = _report(stack)
    assert not result.problems
    found = pools.pools(evaluation)
    gpu_pools = {p.name for p in found if p.gpu}
    assert gpu_pools and all(GPU_TAINT in {str(t) for t in p.taints} for p in found if p.gpu)
    for pod in summaries(evaluation.kubernetes_objects):
        where = set(result.placements[f"{PROGRAM} {pod.ref}"])
        if pod.gpus:
            assert where and where <= gpu_pools, pod.ref
        else:
            assert not where & gpu_pools, f"{pod.ref} (no GPU) could take a GPU node"


def test_daemonsets_list_every_pool_they_tolerate():
    _, result = _report("prod")
    every = {"system", "h100"}
    # NFD's worker tolerates the GPU taint; node-exporter tolerates every NoSchedule taint.
    for ds in DAEMONSETS:
        assert {p.split(" ", 1)[0] for p in result.placements[ds]} == every, ds
    # The EFA device plugin selects vpc.amazonaws.com/efa.present=true and p5.48xlarge among its
    # instance types: both sources of the EFA pool's nodes, never the system nodes.
    efa = result.placements["kube-system/aws-efa-k8s-device-plugin DaemonSet/aws-efa-k8s-device-plugin"]
    assert sorted(efa) == [
        "h100 (EKS managed node group `llm-serving-prod-h100-ng`)",
        "h100 (Karpenter NodePool `llm-serving-h100`)",
    ]


# --- Placement rules on synthetic pods --------------------------------------------------------


def _pod(kind: str = "Deployment", **spec) -> dict:
    pod_spec = {
        "containers": [
            {"name": "c", "image": "registry.example/c:1", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
        ],
        **spec,
    }
    body: dict = {"template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}}
    if kind == "Deployment":
        body["replicas"] = 1
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "x", "namespace": "ns"}, "spec": body}


def _rendered(*objects: dict) -> list[RenderedRelease]:
    release = Release("ns-x", "x", "ns", "example/x", "1.0.0", {}, ())
    return [RenderedRelease(release, list(objects), [])]


def _where(obj: dict, stack: str = "prod") -> list[str]:
    evaluation = committed_stack(stack)
    result = report(_rendered(obj), [], pools.pools(evaluation), stack)
    return sorted({p.split(" ", 1)[0] for p in result.placements[f"ns/x {obj['kind']}/x"]})


def test_a_pod_whose_node_selector_no_pool_has_is_reported_with_its_release():
    obj = _pod(nodeSelector={"disktype": "ssd"})
    result = report(_rendered(obj), [], pools.pools(committed_stack("prod")), "prod")
    assert result.placements["ns/x Deployment/x"] == []
    [problem] = result.problems
    assert problem.startswith("ns/x: `Deployment/x` can schedule on none of the stack's pools")
    assert "nodeSelector `disktype=ssd`" in problem
    assert "| ns/x | `Deployment/x` | 1 | **nowhere** |" in "\n".join(result.lines)


def test_required_affinity_and_selector_operators():
    system_only = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": contract.LABEL_POOL, "operator": "In", "values": ["system"]}]}
        ]
    }
    assert _where(_pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": system_only}})) == [
        "system"
    ]
    # Karpenter's own: off Karpenter's nodes, and the GPU taint tolerated: the managed node group only.
    off_karpenter = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": pools.KARPENTER_NODEPOOL_LABEL, "operator": "DoesNotExist"}]}
        ]
    }
    gpu = [{"key": contract.GPU_TAINT_KEY, "operator": "Exists"}]
    obj = _pod(
        tolerations=gpu, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": off_karpenter}}
    )
    evaluation = committed_stack("prod")
    result = report(_rendered(obj), [], pools.pools(evaluation), "prod")
    assert sorted(result.placements["ns/x Deployment/x"]) == [
        "h100 (EKS managed node group `llm-serving-prod-h100-ng`)",
        "system (EKS managed node group `llm-serving-prod-system-ng`)",
    ]
    # An empty term matches no node; terms are ORed.
    empty = {"nodeSelectorTerms": [{}]}
    assert _where(_pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": empty}})) == []
    either = {"nodeSelectorTerms": [{}, *system_only["nodeSelectorTerms"]]}
    assert _where(_pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": either}})) == [
        "system"
    ]


@pytest.mark.parametrize(
    "tolerations, pools_expected",
    [
        ([], ["system"]),
        ([{"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}], ["h100", "system"]),
        ([{"key": contract.GPU_TAINT_KEY, "operator": "Equal", "value": "present"}], ["h100", "system"]),
        # Equal with another value, or another effect, does not tolerate the GPU taint.
        ([{"key": contract.GPU_TAINT_KEY, "operator": "Equal", "value": "absent"}], ["system"]),
        ([{"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}], ["system"]),
        # An empty key with Exists tolerates every taint.
        ([{"operator": "Exists"}], ["h100", "system"]),
    ],
)
def test_daemonset_tolerations_against_the_gpu_taint(tolerations, pools_expected):
    assert _where(_pod("DaemonSet", tolerations=tolerations)) == pools_expected


def test_gke_taints_a_gpu_pool_even_without_the_programs_taint():
    evaluation = copy.deepcopy(committed_stack("dev"))
    [gpu_pool] = [r for r in evaluation.of_type(pools.GKE_NODE_POOL) if r.inputs["nodeConfig"].get("guestAccelerators")]
    gpu_pool.inputs["nodeConfig"].pop("taints")
    [l4] = [p for p in pools.pools(evaluation) if p.gpu]
    assert [str(t) for t in l4.taints] == [GPU_TAINT]
    assert l4.labels[pools.GKE_ACCELERATOR_LABEL] == "nvidia-l4"
    assert _where(_pod("DaemonSet"), "dev") == ["system"]


def test_tolerates_follows_the_kubernetes_rules():
    taint = pools.Taint("k", "v", "NoSchedule")
    assert placement.tolerates({"key": "k", "value": "v"}, taint)  # Equal is the default operator
    assert not placement.tolerates({"key": "k", "value": "w"}, taint)
    assert placement.tolerates({"key": "k", "operator": "Exists"}, taint)
    assert not placement.tolerates({"operator": "Equal"}, taint)  # an empty key needs Exists
    assert not placement.tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)


# --- A system pool too small ------------------------------------------------------------------


@functools.cache
def _small_system_pool() -> Evaluation:
    config, _ = stack_file_config("prod")
    cluster = json.loads(config["llm-serving:cluster"])
    # m6i.large: 2 vCPU, 8 GiB; at most 2 nodes.
    cluster["systemPool"] = {"machineType": "m6i.large", "minNodes": 1, "maxNodes": 2}
    return evaluate_stack("prod", overrides={"cluster": cluster})


def test_a_system_pool_too_small_is_warned_with_the_key_and_the_fix():
    evaluation = _small_system_pool()
    result = helm.placement_report(evaluation)
    result_fit = result.fit
    assert result_fit is not None and result_fit.pool.machine_type == "m6i.large"
    # 2000m less 60m + 10m reserved; 3 ENIs x (10 - 1) + 2 = 29 pods, 11 x 29 + 255 MiB kube-reserved.
    assert result_fit.node is not None and result_fit.node.cpu == pytest.approx(1.93)
    assert result_fit.node.memory == pytest.approx((8192 - (11 * 29 + 255) - 100) * MIB)
    # Less NFD's worker (5m), a node holds one 1-CPU pod and never two (1.925 CPU left): every
    # Karpenter and picker replica takes a node of its own.
    one_cpu = [
        o
        for o in helm.rendered(evaluation)
        for pod in summaries(o.objects)
        if pod.cpu >= 1 and pod.count not in ("per node", "run once")
        for _ in range(int(pod.replicas))
    ]
    assert result_fit.nodes == len(one_cpu) > result_fit.pool.max_nodes
    assert not result_fit.fits
    [warning] = [w for w in result.problems if fit.MAX_NODES_KEY in w]
    assert warning.startswith("Pulumi.prod.yaml: the system pool's pods need")
    assert f"Raise `{fit.MAX_NODES_KEY}` to {result_fit.nodes} or set `{fit.MACHINE_KEY}` to a larger type" in warning
    # The 70B model's mirror Job fetches with 4 CPUs: no m6i.large can ever hold it.
    [too_large] = [w for w in result.problems if "can hold" in w]
    assert "Job/llama-3-3-70b-instruct-mirror-" in too_large and fit.MACHINE_KEY in too_large
    assert "**does not fit**" in "\n".join(result.lines)


def test_a_machine_type_the_table_lacks_gets_no_invented_verdict():
    evaluation = copy.deepcopy(committed_stack("prod"))
    [group] = [r for r in evaluation.of_type(pools.EKS_NODE_GROUP) if "system" in r.name]
    group.inputs["instanceTypes"] = ["x9.mega"]
    result = report(helm.rendered(committed_stack("prod")), [], pools.pools(evaluation), "prod")
    assert result.fit is not None and result.fit.nodes is None and not result.fit.fits
    assert any("x9.mega is not in offline_plan/helm/machines.py" in w and fit.MACHINE_KEY in w for w in result.problems)


def test_an_existing_cluster_says_its_pools_are_unknown():
    evaluation = variant(EXISTING)
    assert pools.pools(evaluation) == []
    result = helm.placement_report(evaluation)
    assert result.fit is None and not result.problems and not result.placements
    assert "their pools, labels, taints and sizes are unknown here" in "\n".join(result.lines)


def test_reservations_match_the_clouds_formulas():
    # nodeadm's integer arithmetic on millicores; GKE's table, e.g. 16 GiB: 1 + 0.8 + 0.8 GiB.
    assert [machines.reserved_cpu_millicores(n) for n in (1, 2, 4, 8, 32)] == [60, 70, 80, 90, 80 + 28 * 25 // 10]
    assert machines.gke_reserved_memory_mib(16 * 1024) == pytest.approx(2.6 * 1024)
    assert machines.gke_reserved_memory_mib(512) == 255
    assert machines.gke_reserved_memory_mib(256 * 1024) == pytest.approx((2.6 + 0.06 * 112 + 0.02 * 128) * 1024)
    assert machines.eks_max_pods(machines.MACHINES["aws"]["m6i.4xlarge"]) == 8 * 29 + 2


def test_karpenter_replicas_are_kept_apart_by_their_required_anti_affinity():
    rendered = helm.rendered(committed_stack("prod"))
    [controller] = [pod for r in rendered if r.release.chart_name == "karpenter" for pod in summaries(r.objects)]
    assert controller.spread_by_host and controller.replicas == 2
    # Without it the same pods pack onto one node: the anti-affinity is what makes prod need two.
    system = pools.system_pool(pools.pools(committed_stack("prod")))
    assert system is not None
    placed = helm.placement_report(committed_stack("prod"))
    assert placed.fit is not None
    on_system = [
        fit.Placed(owner, pod)
        for r in rendered
        for pod in summaries(r.objects)
        for owner in [f"{r.release.namespace}/{r.release.name}"]
        if any(p.startswith("system ") for p in placed.placements[f"{owner} {pod.ref}"])
    ]
    for p in on_system:
        p.pod.spread_by_host = False
    assert fit.fit(system, on_system, "prod").nodes == 1


def test_the_prometheus_operators_pods_are_counted_from_their_custom_resources():
    prometheus = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "replicas": 2,
            "shards": 3,
            "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}},
            "nodeSelector": {contract.LABEL_POOL: "system"},
        },
    }
    operator = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "operator", "namespace": "ns"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "operator",
                            "args": ["--config-reloader-cpu-request=10m", "--config-reloader-memory-request=32Mi"],
                        }
                    ]
                }
            }
        },
    }
    [pod] = operand_summaries([prometheus, operator])
    # Two replicas of each of three shards; the sidecar's request on top of spec.resources.
    assert (pod.ref, pod.replicas, pod.unset) == ("Prometheus/p", 6, [])
    assert pod.cpu == pytest.approx(0.51) and pod.memory == pytest.approx(2 * 2**30 + 32 * MIB)
    [alone] = operand_summaries([prometheus])
    assert alone.unset == ["config-reloader"] and alone.cpu == pytest.approx(0.5)
    result = report(_rendered(prometheus, operator), [], pools.pools(committed_stack("prod")), "prod")
    assert [p.split(" ", 1)[0] for p in result.placements["ns/x Prometheus/p"]] == ["system"]
