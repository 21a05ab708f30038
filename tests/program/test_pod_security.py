"""Pods and namespaces (issue 17 item 1): what the program emits, and the two rules that guard it.

- Every pod template of the committed stacks and of the variants with a LeaderWorkerSet, KServe
  (predictor and canary) and a bucket-backed store wears the hardened shape of common/pod_security.py,
  or waives a control with its reason on the pod.
- Each namespace enforces the level decided from what the stack runs in it.
- pod-security-context and namespace-pod-security on good and bad inputs, and on a copy of each
  committed stack with one control removed.
"""

from __future__ import annotations

import copy
import functools
import json

import pytest

from common import pod_security as ps
from offline_plan.mock_runtime import evaluate_stack
from policies.check import check_objects
from policies.rules.pod_security import namespace_pod_security, pod_security_context
from policies.workloads import workload
from tests.support.committed import committed_stack
from tests.support.policy_engine import analyze_k8s, cloud_records
from tests.support.stack_variants import DEV_MODELS, KSERVE, MULTI_NODE, NO_ENTRANCE, variant

ENFORCE = f"{ps.PSA_PREFIX}/enforce"
HARDENED = ps.container_security_context()


@functools.cache
def committed(stack: str):
    return committed_stack(stack)


def pod_views(objects):
    for obj in objects:
        w = workload(obj)
        if w is not None:
            for pod in w.pods:
                yield obj, pod


def namespace(objects, name):
    return next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == name)


def mandatory(objects, evaluation) -> set[str]:
    return {v.policy for v in check_objects(objects + cloud_records(evaluation)) if v.level == "mandatory"}


# --- what the program emits -------------------------------------------------------------------


@pytest.mark.parametrize("source", ["dev", "prod", MULTI_NODE, KSERVE])
def test_every_pod_the_program_creates_is_hardened_or_says_why_not(source):
    evaluation = committed(source) if source in ("dev", "prod") else variant(source)
    seen = set()
    for obj, pod in pod_views(evaluation.kubernetes_objects):
        seen.add((obj["kind"], pod.where))
        # A KServe ServingRuntime holds containers merged into its InferenceService's pod; the pod-level
        # fields are the InferenceService's (its schema has none), checked on the predictor.
        if obj["kind"] not in ("ServingRuntime", "ClusterServingRuntime"):
            assert pod.spec["automountServiceAccountToken"] is False, obj["metadata"]["name"]
            assert pod.spec["securityContext"]["seccompProfile"] == ps.RUNTIME_DEFAULT_SECCOMP
        waived = ps.parse_exceptions(pod.annotations.get(ps.EXCEPTION_ANNOTATION))
        for c in pod.containers:
            ctx = c.container["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}
            assert ctx["seccompProfile"] == ps.RUNTIME_DEFAULT_SECCOMP
            if ps.RUN_AS_NON_ROOT in waived and c.name == "fetch":  # the one container that may keep root
                assert ctx["runAsNonRoot"] is False
            else:
                assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == ps.RUN_AS_USER
            assert ctx["readOnlyRootFilesystem"] is True
    expected = {
        "dev": {("Deployment", "spec.template"), ("Job", "spec.template")},
        "prod": {("Deployment", "spec.template"), ("Job", "spec.template")},
        MULTI_NODE: {
            ("LeaderWorkerSet", "spec.leaderWorkerTemplate.leaderTemplate"),
            ("LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate"),
        },
        KSERVE: {("InferenceService", "spec.predictor"), ("ServingRuntime", "spec")},
    }[source]
    assert expected <= seen, seen


def test_the_vllm_server_gets_writable_home_and_tmp_on_a_read_only_root():
    (deployment,) = [
        o
        for o in committed("prod").kubernetes_objects
        if o["kind"] == "Deployment" and o["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"
    ][:1]
    spec = deployment["spec"]["template"]["spec"]
    (server,) = spec["containers"]
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    env = {e["name"]: e.get("value") for e in server["env"]}
    for path in (env["HOME"], "/tmp", "/dev/shm"):
        assert "emptyDir" in volumes[mounts[path]], path
        assert volumes[mounts[path]]["emptyDir"].get("sizeLimit"), path


def test_the_mirror_keeps_root_only_on_a_shared_volume_and_says_why():
    # prod mirrors into a ReadWriteMany volume: fetch keeps uid 0, with the reason on the pod.
    (job,) = [o for o in committed("prod").kubernetes_objects if o["kind"] == "Job"][:1]
    template = job["spec"]["template"]
    waived = ps.parse_exceptions(template["metadata"]["annotations"][ps.EXCEPTION_ANNOTATION])
    assert set(waived) == {ps.RUN_AS_NON_ROOT}
    assert "fsGroup" not in template["spec"]["securityContext"]
    # The sync container (bucket upload) never needs root.
    for c in template["spec"]["containers"] + template["spec"].get("initContainers", []):
        if c["name"] == "sync":
            assert c["securityContext"]["runAsNonRoot"] is True


def test_a_bucket_backed_store_mirrors_as_non_root_and_the_namespace_can_be_restricted():
    evaluation = evaluate_stack(
        "dev", overrides={"models": DEV_MODELS, "modelStore": {"loadFrom": "bucket"}, **NO_ENTRANCE}
    )
    objects = evaluation.kubernetes_objects
    for job in (o for o in objects if o["kind"] == "Job"):
        template = job["spec"]["template"]
        assert ps.EXCEPTION_ANNOTATION not in template["metadata"].get("annotations", {})
        assert template["spec"]["securityContext"]["fsGroup"] == ps.FS_GROUP
    serving = namespace(objects, "llm-serving")
    assert serving["metadata"]["labels"][ENFORCE] == ps.RESTRICTED
    assert ps.LEVEL_REASON_ANNOTATION not in serving["metadata"].get("annotations", {})
    assert mandatory(objects, evaluation) == set()


@pytest.mark.parametrize("stack, reasons", [("dev", {"mirror", "entrance"}), ("prod", {"mirror", "entrance"})])
def test_the_serving_namespace_level_comes_from_what_the_stack_runs(stack, reasons):
    serving = namespace(committed(stack).kubernetes_objects, "llm-serving")
    labels, annotations = serving["metadata"]["labels"], serving["metadata"]["annotations"]
    assert labels[ENFORCE] == ps.BASELINE and labels[f"{ps.PSA_PREFIX}/enforce-version"] == ps.PSA_VERSION
    assert labels[f"{ps.PSA_PREFIX}/warn"] == labels[f"{ps.PSA_PREFIX}/audit"] == ps.RESTRICTED
    reason = annotations[ps.LEVEL_REASON_ANNOTATION]
    assert {who for who in ("mirror", "entrance", "kserve") if f"{who}:" in reason} == reasons
    assert "llm-d-router-gateway" in reason


def test_every_namespace_the_program_creates_is_labelled():
    for stack in ("dev", "prod"):
        for ns in (o for o in committed(stack).kubernetes_objects if o["kind"] == "Namespace"):
            assert ns["metadata"]["labels"][ENFORCE] in ps.PSA_LEVELS, ns["metadata"]["name"]
    gpu = namespace(committed("prod").kubernetes_objects, "gpu-operator")
    assert gpu["metadata"]["labels"][ENFORCE] == ps.PRIVILEGED
    monitoring = namespace(committed("prod").kubernetes_objects, "monitoring")
    assert "node-exporter" in monitoring["metadata"]["annotations"][ps.LEVEL_REASON_ANNOTATION]


# --- a copy of each committed stack with one control removed ------------------------------------


def _drop_server_seccomp(objects):
    for obj in objects:
        if obj["kind"] == "Deployment":
            for c in obj["spec"]["template"]["spec"]["containers"]:
                c["securityContext"].pop("seccompProfile")
            obj["spec"]["template"]["spec"]["securityContext"].pop("seccompProfile")
            return


def _drop_mirror_reason(objects):
    for obj in objects:
        if obj["kind"] == "Job":
            obj["spec"]["template"]["metadata"]["annotations"].pop(ps.EXCEPTION_ANNOTATION)
            return


def _drop_serving_enforce_label(objects):
    namespace(objects, "llm-serving")["metadata"]["labels"].pop(ENFORCE)


def _drop_operator_namespace_reason(objects):
    namespace(objects, "gpu-operator")["metadata"]["annotations"].pop(ps.LEVEL_REASON_ANNOTATION)


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize(
    "breaker, policy",
    [
        (_drop_server_seccomp, "pod-security-context"),
        (_drop_mirror_reason, "pod-security-context"),
        (_drop_serving_enforce_label, "namespace-pod-security"),
        (_drop_operator_namespace_reason, "namespace-pod-security"),
    ],
)
def test_a_committed_stack_with_one_control_removed_fails_with_the_right_rule(stack, breaker, policy):
    evaluation = committed(stack)
    assert mandatory(evaluation.kubernetes_objects, evaluation) == set()
    objects = copy.deepcopy(evaluation.kubernetes_objects)
    breaker(objects)
    assert mandatory(objects, evaluation) == {policy}


# --- the rules on small inputs ----------------------------------------------------------------


def pod(container_ctx=None, pod_ctx=None, annotations=None, kind="Pod", **spec):
    c = {"name": "app", "image": "nginx:1.27.2"}
    if container_ctx is not None:
        c["securityContext"] = container_ctx
    pod_spec = {"containers": [c], "automountServiceAccountToken": False, **spec}
    if pod_ctx is not None:
        pod_spec["securityContext"] = pod_ctx
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": pod_spec,
    }


def problems(obj) -> str:
    return " | ".join(pod_security_context(obj, {}))


def test_the_hardened_shape_passes_and_each_missing_control_is_named():
    assert problems(pod(HARDENED)) == ""
    for key, text in [
        ("allowPrivilegeEscalation", "allowPrivilegeEscalation: false"),
        ("capabilities", "drop ALL"),
        ("seccompProfile", "seccompProfile"),
        ("runAsNonRoot", "runAsNonRoot: true"),
        ("readOnlyRootFilesystem", "readOnlyRootFilesystem"),
    ]:
        ctx = {k: v for k, v in HARDENED.items() if k != key}
        found = problems(pod(ctx))
        assert text in found and found.startswith("Pod/p: container 'app' in spec "), (key, found)


def test_pod_level_settings_count_and_container_level_overrides_them():
    ctx = {k: v for k, v in HARDENED.items() if k not in ("seccompProfile", "runAsNonRoot", "runAsUser")}
    assert problems(pod(ctx, ps.pod_security_context())) == ""
    unconfined = {**ctx, "seccompProfile": {"type": "Unconfined"}}
    assert "seccompProfile" in problems(pod(unconfined, ps.pod_security_context()))
    as_root = {**ctx, "runAsUser": 0}
    assert "runAsUser: 0" in problems(pod(as_root, ps.pod_security_context()))


def test_privileged_and_added_capabilities_are_refused_but_net_bind_service_is_allowed():
    assert "is privileged" in problems(pod({**HARDENED, "privileged": True}))
    caps = {"drop": ["ALL"], "add": ["SYS_ADMIN", "NET_BIND_SERVICE"]}
    found = problems(pod({**HARDENED, "capabilities": caps}))
    assert "adds capabilities SYS_ADMIN" in found and "NET_BIND_SERVICE" not in found


def test_an_api_token_needs_false_or_a_reason():
    obj = pod(HARDENED)
    obj["spec"].pop("automountServiceAccountToken")
    assert "automountServiceAccountToken: false" in problems(obj)
    obj["metadata"]["annotations"] = ps.exception_annotation(
        {ps.AUTOMOUNT_TOKEN: "the picker watches its InferencePool and holds a leader-election lease"}
    )
    assert problems(obj) == ""


def test_a_waiver_needs_a_waivable_control_and_a_real_reason():
    root = {**HARDENED, "runAsNonRoot": False}
    root.pop("runAsUser")
    waived = ps.exception_annotation({ps.RUN_AS_NON_ROOT: "writes to a root-owned NFS export without fsGroup"})
    assert problems(pod(root, annotations=waived)) == ""
    short = {ps.EXCEPTION_ANNOTATION: "runAsNonRoot: legacy"}
    found = problems(pod(root, annotations=short))
    assert "waives nothing it may" in found and "runAsNonRoot: true" in found
    # The never-waivable controls stay required whatever the annotation says.
    bad = {ps.EXCEPTION_ANNOTATION: "allowPrivilegeEscalation: because the image needs setuid binaries"}
    assert "allowPrivilegeEscalation: false" in problems(
        pod({**HARDENED, "allowPrivilegeEscalation": True}, annotations=bad)
    )
    with pytest.raises(ValueError, match="capabilities cannot be waived"):
        ps.exception_annotation({"capabilities": "a reason long enough to pass the length check"})


def test_every_pod_template_of_a_job_lws_and_kserve_is_walked():
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "g"},
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": pod(HARDENED)["spec"] and {"spec": pod(HARDENED)["spec"]},
                "workerTemplate": {"spec": pod({"allowPrivilegeEscalation": False})["spec"]},
            }
        },
    }
    found = pod_security_context(lws, {})
    assert len(found) == 1 and "workerTemplate" in found[0]
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "m"},
        "spec": {
            "predictor": {
                "automountServiceAccountToken": False,
                "securityContext": ps.pod_security_context(),
                "model": {"modelFormat": {"name": "huggingface"}, "securityContext": HARDENED},
            },
            "transformer": {"automountServiceAccountToken": False, "containers": [{"name": "t", "image": "t:1.0.0"}]},
        },
    }
    found = pod_security_context(isvc, {})
    assert len(found) == 1 and "spec.transformer" in found[0]
    # A KServe runtime is a container template; its pod-level fields belong to the InferenceService.
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "r"},
        "spec": {"containers": [{"name": "kserve-container", "image": "r:1.0.0", "securityContext": HARDENED}]},
    }
    assert pod_security_context(runtime, {}) == []


def ns(labels=None, annotations=None):
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "n", "labels": labels or {}, "annotations": annotations or {}},
    }


def test_namespace_rule():
    assert namespace_pod_security(ns(ps.namespace_labels(ps.RESTRICTED)), {}) == []
    assert "no pod-security.kubernetes.io/enforce" in namespace_pod_security(ns(), {})[0]
    assert "unknown level 'strict'" in namespace_pod_security(ns({ENFORCE: "strict"}), {})[0]
    baseline = ps.namespace_labels(ps.BASELINE)
    assert "without saying why" in namespace_pod_security(ns(baseline), {})[0]
    reason = ps.namespace_annotations(ps.BASELINE, ["picker: the chart sets no securityContext for its pods"])
    assert namespace_pod_security(ns(baseline, reason), {}) == []


def test_the_rules_run_through_the_engine_as_mandatory():
    result = analyze_k8s(pod({"allowPrivilegeEscalation": False}))
    assert result.of("pod-security-context")[0].level == "mandatory"
    result = analyze_k8s(ns())
    assert result.policies() == {"namespace-pod-security"}


def test_levels_and_reasons():
    assert ps.strictest_level({}) == (ps.RESTRICTED, [])
    level, reasons = ps.strictest_level({"a": "baseline: reason a for this", "b": "privileged: reason b for this"})
    assert level == ps.PRIVILEGED and reasons == ["b: reason b for this"]
    with pytest.raises(ValueError, match="is not '<Pod Security level>: <reason>'"):
        ps.strictest_level({"a": "strict: no such level"})
    with pytest.raises(ValueError, match="Pod Security level baseline needs the reason it is weaker than restricted"):
        ps.namespace_annotations(ps.BASELINE, [])


# The rule's advice, followed literally, gives what the program gives vLLM -------------------------

# A vLLM Deployment written by hand with no securityContext at all (the image runs as root).
_BARE_VLLM = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "llama"},
    "spec": {
        "selector": {"matchLabels": {"app": "llama"}},
        "template": {
            "metadata": {"labels": {"app": "llama"}},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.32.0",
                        "command": ["vllm", "serve", "/models/llama"],
                        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
                        "volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "models"}}],
            },
        },
    },
}


def _value_after(message: str, phrase: str):
    """The JSON value the message prints right after `phrase` (one line of JSON is YAML flow style)."""
    start = message.index(phrase) + len(phrase)
    value, _ = json.JSONDecoder().raw_decode(message[start:])
    return value


def _follow_the_advice(obj: dict, message: str) -> dict:
    fixed = copy.deepcopy(obj)
    pod = fixed["spec"]["template"]["spec"]
    c = pod["containers"][0]
    c["securityContext"] = _value_after(message, "set the container's securityContext to ")
    pod["securityContext"] = _value_after(message, " and the pod's to ")
    c["env"] += _value_after(message, "add to the container env ")
    c["volumeMounts"] += _value_after(message, " and volumeMounts ")
    pod["volumes"] += _value_after(message, " and to the pod volumes ")
    return fixed


def test_the_pod_security_advice_followed_literally_passes_and_is_what_the_program_gives_vllm():
    (finding,) = analyze_k8s(_BARE_VLLM).of("pod-security-context")
    assert ps.SECURITY_DOC in finding.message and "vLLM's does" in finding.message
    fixed = _follow_the_advice(_BARE_VLLM, finding.message)
    assert analyze_k8s(fixed).of("pod-security-context") == []
    # What the program emits for its own vLLM server: the same contexts, HOME and writable mounts.
    served = next(o for o in committed_stack("dev").kubernetes_objects if o["kind"] == "Deployment" and _is_vllm(o))
    pod, fixed_pod = served["spec"]["template"]["spec"], fixed["spec"]["template"]["spec"]
    server = next(c for c in pod["containers"] if c["name"] == fixed_pod["containers"][0]["name"])
    advised = fixed_pod["containers"][0]
    assert server["securityContext"] == advised["securityContext"]
    assert pod["securityContext"] == fixed_pod["securityContext"]
    assert advised["env"][-1] == {"name": "HOME", "value": ps.WRITABLE_HOME} and advised["env"][-1] in server["env"]
    for mount in advised["volumeMounts"][1:]:
        assert mount in server["volumeMounts"]
    for volume in fixed_pod["volumes"][1:]:
        assert volume in pod["volumes"]
    assert {m["mountPath"] for m in advised["volumeMounts"]} >= {ps.WRITABLE_HOME, ps.WRITABLE_TMP}


def _is_vllm(obj: dict) -> bool:
    return any("vllm-openai" in c.get("image", "") for c in obj["spec"]["template"]["spec"]["containers"])


def test_a_container_already_non_root_on_a_read_only_root_is_not_told_about_writable_paths():
    obj = copy.deepcopy(_BARE_VLLM)
    c = obj["spec"]["template"]["spec"]["containers"][0]
    c["securityContext"] = {**ps.container_security_context(), "seccompProfile": {"type": "Unconfined"}}
    (finding,) = analyze_k8s(obj).of("pod-security-context")
    assert "seccompProfile" in finding.message and "add to the container env" not in finding.message
