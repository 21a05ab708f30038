"""Find the pod specs and containers inside any workload object, whatever its kind.

One walker serves every container rule, so adding a workload kind (say, a new CRD) is one edit
here instead of one per rule. Kinds and paths:

- Pod: `spec`; Deployment, StatefulSet, DaemonSet, ReplicaSet, Job: `spec.template`;
  CronJob: `spec.jobTemplate.spec.template`.
- LeaderWorkerSet (leaderworkerset.x-k8s.io): `spec.leaderWorkerTemplate.leaderTemplate` and
  `.workerTemplate` (pod templates).
- KServe InferenceService (serving.kserve.io): `spec.predictor` (and `transformer`, `explainer`)
  embed pod-spec fields inline (containers, tolerations, volumes ...); the model container is
  `spec.predictor.model` (or a framework key such as `huggingface`); `workerSpec` is the
  multi-node worker pod. Each `spec.canary[i]` holds the same components (v0.20's CRD: `predictor`
  and `trafficPercent`), a second set of pods that serves real traffic, so it is walked alike.
- KServe ServingRuntime / ClusterServingRuntime: `spec` is a pod spec (`spec.containers`), plus
  `spec.workerSpec`.
- KServe LLMInferenceService and LLMInferenceServiceConfig (serving.kserve.io v1alpha1 and
  v1alpha2, kserve/kserve v0.20.0 config/crd/full/llmisvc/): `spec.template` and `spec.worker`
  (decode, or the multi-node leader and workers), `spec.prefill.template` and `spec.prefill.worker`
  (disaggregated prefill) and `spec.router.scheduler.template` (the endpoint picker) are pod specs
  themselves (not pod templates); `spec.labels`/`spec.annotations` go on the pods and
  `spec.replicas` counts them. The controller merges the templates over the LLMInferenceServiceConfig
  presets the object names (`baseRefs`) and its defaults; the pack judges each template as written,
  so a field left to a preset is judged absent (write it, or lower that rule in the pack config).

Not walked (out of scope): kinds whose schema the repository holds no CRD for, among them Argo
Rollouts' Rollout (`spec.template`, or `spec.workloadRef` to a Deployment), Knative Services, Ray
clusters and Kubeflow training jobs; their pods pass unchecked, as policies/README.md says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.objects import as_dict, as_list, as_number, as_str, is_unknown

TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"}
RUN_TO_COMPLETION_KINDS = {"Job", "CronJob"}
# Framework keys of a KServe PredictorSpec that hold a ModelSpec (a container plus storageUri).
KSERVE_MODEL_KEYS = (
    "model",
    "huggingface",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "pmml",
    "lightgbm",
    "paddle",
)
KSERVE_COMPONENTS = ("predictor", "transformer", "explainer")
# KServe labels every pod of an InferenceService with its name (pkg/constants InferenceServicePodLabelKey).
KSERVE_POD_LABEL = "serving.kserve.io/inferenceservice"
LLM_ISVC_KINDS = ("LLMInferenceService", "LLMInferenceServiceConfig")
# Where an LLMInferenceService spec holds a pod spec (kserve v0.20.0 CRD, both served versions).
LLM_ISVC_POD_PATHS = (
    ("template",),
    ("worker",),
    ("prefill", "template"),
    ("prefill", "worker"),
    ("router", "scheduler", "template"),
)


@dataclass
class ContainerView:
    container: dict
    # containers | initContainers | ephemeralContainers | model (the KServe model container)
    section: str

    @property
    def name(self) -> str:
        return as_str(self.container.get("name")) or ("kserve-container" if self.section == "model" else "?")

    @property
    def label(self) -> str:
        """How messages name the container: "container 'vllm'", "init container 'fetch'"."""
        prefix = {
            "containers": "container",
            "initContainers": "init container",
            "ephemeralContainers": "ephemeral container",
            "model": "model container",
        }[self.section]
        return f"{prefix} '{self.name}'"

    @property
    def is_sidecar(self) -> bool:
        # Native sidecars (Kubernetes 1.28+) are init containers that keep running.
        return self.section == "initContainers" and self.container.get("restartPolicy") == "Always"

    @property
    def runs_alongside(self) -> bool:
        """Runs for the life of the pod (a main container or a native sidecar), so probes apply."""
        return self.section in ("containers", "model") or self.is_sidecar


@dataclass
class PodView:
    # Where in the object this pod spec sits, for messages ("spec.template.spec", "predictor").
    where: str
    spec: dict
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    containers: list[ContainerView] = field(default_factory=list)


@dataclass
class Workload:
    kind: str
    name: str
    namespace: str | None
    metadata: dict
    pods: list[PodView]
    # False for Jobs, CronJobs and bare Pods that run to completion.
    long_running: bool
    # Desired pod (or LWS group) count; None when the kind has no such notion (DaemonSet, Pod).
    replicas: float | None

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


def _containers(spec: dict, sections=("initContainers", "containers", "ephemeralContainers")) -> list[ContainerView]:
    views = []
    for section in sections:
        for c in as_list(spec.get(section)):
            if isinstance(c, dict):
                views.append(ContainerView(c, section))
    return views


def _template_pod(where: str, template: object) -> PodView | None:
    template = as_dict(template)
    spec = as_dict(template.get("spec"))
    if not spec:
        return None
    meta = as_dict(template.get("metadata"))
    return PodView(where, spec, as_dict(meta.get("labels")), as_dict(meta.get("annotations")), _containers(spec))


def _kserve_component(where: str, comp: dict, isvc_name: str, isvc_meta: dict) -> list[PodView]:
    pods = []
    views = _containers(comp)
    for key in KSERVE_MODEL_KEYS:
        model = comp.get(key)
        if isinstance(model, dict):
            views.append(ContainerView(model, "model"))
    labels = {**as_dict(isvc_meta.get("labels")), **as_dict(comp.get("labels")), KSERVE_POD_LABEL: isvc_name}
    annotations = as_dict(comp.get("annotations"))
    if views or comp:
        pods.append(PodView(where, comp, labels, annotations, views))
    worker = as_dict(comp.get("workerSpec"))
    if worker:
        pods.append(PodView(f"{where}.workerSpec", worker, labels, annotations, _containers(worker)))
    return pods


def kserve_components(spec: dict) -> list[tuple[str, dict]]:
    """(where, component) for every component of an InferenceService spec, the canaries' included."""
    found = [(f"spec.{key}", spec[key]) for key in KSERVE_COMPONENTS if isinstance(spec.get(key), dict)]
    for i, item in enumerate(as_list(spec.get("canary"))):
        item = as_dict(item)
        found += [
            (f"spec.canary[{i}].{key}", item[key]) for key in KSERVE_COMPONENTS if isinstance(item.get(key), dict)
        ]
    return found


def _llm_isvc_pods(spec: dict) -> list[PodView]:
    labels, annotations = as_dict(spec.get("labels")), as_dict(spec.get("annotations"))
    pods = []
    for path in LLM_ISVC_POD_PATHS:
        node: object = spec
        for key in path:
            node = as_dict(node).get(key)
        pod_spec = as_dict(node)
        if pod_spec:
            pods.append(PodView("spec." + ".".join(path), pod_spec, labels, annotations, _containers(pod_spec)))
    return pods


def workload(obj: dict) -> Workload | None:
    """The workload view of a Kubernetes object, or None when it carries no pod spec."""
    kind = as_str(obj.get("kind")) or ""
    meta = as_dict(obj.get("metadata"))
    name = as_str(meta.get("name")) or "<unnamed>"
    namespace = meta.get("namespace")
    # Keep an unknown namespace unknown (it often comes from a Namespace resource during preview).
    namespace = namespace if is_unknown(namespace) else as_str(namespace)
    spec = as_dict(obj.get("spec"))
    pods: list[PodView] = []
    long_running = kind not in RUN_TO_COMPLETION_KINDS
    replicas = None

    if kind == "Pod":
        if spec:
            pods.append(
                PodView("spec", spec, as_dict(meta.get("labels")), as_dict(meta.get("annotations")), _containers(spec))
            )
        # A bare Pod that restarts Never/OnFailure is a one-off task, like a Job's pod.
        if spec.get("restartPolicy") in ("Never", "OnFailure"):
            long_running = False
    elif kind in TEMPLATE_KINDS:
        pod = _template_pod("spec.template", spec.get("template"))
        pods += [pod] if pod else []
        if kind != "DaemonSet" and kind != "Job":
            replicas = as_number(spec.get("replicas"))
            replicas = 1.0 if replicas is None else replicas
    elif kind == "CronJob":
        job_spec = as_dict(as_dict(spec.get("jobTemplate")).get("spec"))
        pod = _template_pod("spec.jobTemplate.spec.template", job_spec.get("template"))
        pods += [pod] if pod else []
    elif kind == "LeaderWorkerSet":
        lwt = as_dict(spec.get("leaderWorkerTemplate"))
        for role in ("leaderTemplate", "workerTemplate"):
            pod = _template_pod(f"spec.leaderWorkerTemplate.{role}", lwt.get(role))
            pods += [pod] if pod else []
        replicas = as_number(spec.get("replicas"))
        replicas = 1.0 if replicas is None else replicas
    elif kind == "InferenceService":
        for where, comp in kserve_components(spec):
            pods += _kserve_component(where, comp, name, meta)
        predictor = as_dict(spec.get("predictor"))
        replicas = as_number(predictor.get("minReplicas"))
        replicas = 1.0 if replicas is None else replicas
    elif kind in ("ServingRuntime", "ClusterServingRuntime"):
        if spec.get("containers") is not None:
            pods.append(
                PodView("spec", spec, as_dict(spec.get("labels")), as_dict(spec.get("annotations")), _containers(spec))
            )
        worker = as_dict(spec.get("workerSpec"))
        if worker:
            pods.append(PodView("spec.workerSpec", worker, {}, {}, _containers(worker)))
    elif kind in LLM_ISVC_KINDS:
        pods += _llm_isvc_pods(spec)
        replicas = as_number(spec.get("replicas"))
        replicas = 1.0 if replicas is None else replicas
    else:
        return None

    if not pods:
        return None
    return Workload(kind, name, namespace, meta, pods, long_running, replicas)
