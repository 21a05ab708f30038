"""The rule gaps of issue 28 (point 2): each hole on a good and a bad input.

vLLM flags spelled with underscores, literal credentials in probe and hook commands and in ConfigMaps
a container reads, more token formats, a variable set twice, host namespaces and hostPath volumes,
projected API tokens, an old Pod Security enforce-version, an allow-all NetworkPolicy beside a
default-deny, and the LLMInferenceService pod specs. Resource rules are called through the engine's
analyzer (as `pulumi preview` does) and through check_objects (as the manifest checker does); stack
rules through both as well.
"""

from __future__ import annotations

import copy

import pytest

from common.pod_security import EXCEPTION_ANNOTATION, PSA_VERSION
from common.untrusted import secret_kind
from policies.check import check_objects
from tests.support.policy_engine import GOOD_SERVER, analyze_k8s, analyze_stack, k8s_stack_entry

SHA = "0e9e39f249a16976918f6564b8830bc894c89659"
# Synthetic token bodies with the issuers' documented prefixes; none is a real credential.
GITHUB_PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"
GITLAB_PAT = "glpat-" + "Ab3dEf6hIj9kLm2nOp5q"
NPM_TOKEN = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"


def server(**changes) -> dict:
    d = copy.deepcopy(GOOD_SERVER)
    d.update(changes)
    return d


def vllm(d: dict) -> dict:
    return d["spec"]["template"]["spec"]["containers"][0]


def pod_spec(d: dict) -> dict:
    return d["spec"]["template"]["spec"]


def findings(objects: list[dict], policy: str, config: dict | None = None) -> list[str]:
    return [v.message for v in check_objects(objects, config) if v.policy == policy]


def engine(obj: dict, policy: str) -> list[str]:
    return [d.message for d in analyze_k8s(obj).of(policy)]


def test_the_good_server_breaks_none_of_the_new_rules():
    new = {
        "env-set-once",
        "no-host-access",
        "no-projected-api-token",
        "no-secrets-in-config-maps",
        "namespace-pod-security-version",
        "network-policy-no-allow-all",
    }
    assert [v for v in check_objects([GOOD_SERVER]) if v.policy in new] == []
    assert not analyze_k8s(GOOD_SERVER).policies() & new


# --- vLLM flags with underscores (FlexibleArgumentParser turns '_' into '-') ---------------------


@pytest.mark.parametrize(
    "args,policy,expected",
    [
        (["--api_key", "sk-literal-key-abcdefghijklmnop"], "no-literal-secrets", "passes --api-key with a literal"),
        (["--api_key=plain-literal"], "no-literal-secrets", "passes --api-key with a literal"),
        (["--hf_token", "plain-literal"], "no-literal-secrets", "passes --hf-token with a literal"),
        (["--tokenizer_revision", "main"], "model-revision-pinned", "passes --tokenizer-revision 'main'"),
        (["--code_revision=v1"], "model-revision-pinned", "passes --code-revision 'v1'"),
        (["--lora_modules", "a=org/adapter"], "adapter-revision-pinned", "a Hub repo id"),
    ],
)
def test_underscore_spellings_of_vllm_flags_are_read_as_the_flags(args, policy, expected):
    bad = server()
    vllm(bad)["args"] = [*vllm(bad)["args"], *args]
    assert any(expected in m for m in findings([bad], policy)), findings([bad], policy)
    assert any(expected in m for m in engine(bad, policy))
    good = server()
    assert findings([good], policy) == []


def test_an_underscore_revision_flag_counts_as_the_revision():
    # `--revision` spelled `--revision` only: the model is pinned; with a moving --model_revision-like
    # spelling of --revision itself, the pin is still seen.
    d = server()
    args = [a for a in vllm(d)["args"] if a not in ("--revision", SHA)]
    vllm(d)["args"] = [*args, "--model", "org/model", "--revision", SHA]
    assert findings([d], "model-revision-pinned") == []
    vllm(d)["args"] = [*args, "--model", "org/model", "--code_revision", SHA]
    assert any("no --revision" in m for m in findings([d], "model-revision-pinned"))


def test_the_value_of_a_flag_keeps_its_underscores():
    from policies.commands import normalise_flag

    assert normalise_flag("--api_key=a_b") == "--api-key=a_b"
    assert normalise_flag("--hf_overrides.rope_scaling") == "--hf-overrides.rope_scaling"
    assert normalise_flag("org/model_name") == "org/model_name"


# --- literal secrets in probes, hooks, ConfigMaps; token formats; a variable set twice -------------


@pytest.mark.parametrize("token", [GITHUB_PAT, GITHUB_FINE, GITLAB_PAT, NPM_TOKEN, HF_TOKEN])
def test_token_formats_are_recognised(token):
    assert secret_kind(token) is not None
    assert secret_kind(f"export X={token}; run") is not None


@pytest.mark.parametrize("text", ["ghp_short", "glpat-short", "npm_short", "github_pat_x", "sk-llama-3-finetune"])
def test_lookalikes_are_not_tokens(text):
    assert secret_kind(text) is None


@pytest.mark.parametrize("token", [GITHUB_PAT, GITLAB_PAT, NPM_TOKEN])
def test_other_token_formats_in_env_values_are_literal_secrets(token):
    d = server()
    vllm(d)["env"].append({"name": "GIT_CONFIG", "value": token})
    assert any("GIT_CONFIG" in m for m in findings([d], "no-literal-secrets"))


@pytest.mark.parametrize(
    "where",
    [
        ("livenessProbe",),
        ("readinessProbe",),
        ("startupProbe",),
        ("lifecycle", "postStart"),
        ("lifecycle", "preStop"),
    ],
)
@pytest.mark.parametrize(
    "command,expected",
    [
        (["sh", "-c", f"curl -H 'Authorization: Bearer {HF_TOKEN}' localhost:8000/v1/models"], "token-like"),
        (["sh", "-c", "curl -H 'Authorization: Bearer plainkey123' localhost:8000"], "literal Authorization"),
        (["vllm-probe", "--api_key", "plainkey123"], "passes --api-key with a literal value"),
        (["check", GITHUB_PAT], "token-like"),
    ],
)
def test_literal_secrets_in_probe_and_hook_commands(where, command, expected):
    d = server()
    handler = {"exec": {"command": command}}
    target = vllm(d)
    for key in where[:-1]:
        target = target.setdefault(key, {})
    target[where[-1]] = handler
    messages = findings([d], "no-literal-secrets")
    assert any(expected in m and ".".join(where) in m for m in messages), messages


def test_probe_commands_that_read_the_key_from_a_secret_pass():
    d = server()
    vllm(d)["livenessProbe"] = {
        "exec": {"command": ["sh", "-c", 'curl -H "Authorization: Bearer $VLLM_API_KEY" localhost:8000/v1/models']}
    }
    vllm(d)["lifecycle"] = {"preStop": {"exec": {"command": ["probe", "--api-key", "$(VLLM_API_KEY)"]}}}
    assert findings([d], "no-literal-secrets") == []


def test_credential_headers_in_http_probes_are_literal_secrets():
    d = server()
    vllm(d)["readinessProbe"]["httpGet"]["httpHeaders"] = [{"name": "Authorization", "value": "Bearer abc"}]
    assert any("header Authorization" in m for m in findings([d], "no-literal-secrets"))
    assert any("header Authorization" in m for m in engine(d, "no-literal-secrets"))
    d = server()
    vllm(d)["readinessProbe"]["httpGet"]["httpHeaders"] = [{"name": "X-Api-Key", "value": "abc"}]
    assert any("header X-Api-Key" in m for m in findings([d], "no-literal-secrets"))
    d = server()
    vllm(d)["readinessProbe"]["httpGet"]["httpHeaders"] = [{"name": "Accept", "value": "application/json"}]
    assert findings([d], "no-literal-secrets") == []


def config_map(name: str, data: dict, namespace: str = "serving") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.mark.parametrize(
    "data,prefix,expected",
    [
        ({"HF_TOKEN": "plain-literal"}, "", "HF_TOKEN"),
        ({"SETTING": HF_TOKEN}, "", "SETTING"),
        ({"KEY": "plain-literal"}, "API_", "API_KEY"),
    ],
)
def test_envfrom_config_map_with_a_credential(data, prefix, expected):
    d = server()
    vllm(d)["envFrom"] = [{"configMapRef": {"name": "settings"}, **({"prefix": prefix} if prefix else {})}]
    objects = [d, config_map("settings", data)]
    messages = findings(objects, "no-secrets-in-config-maps")
    assert any(expected in m and "ConfigMap 'settings'" in m for m in messages), messages
    stack = analyze_stack([k8s_stack_entry(o) for o in objects])
    assert any(expected in d.message for d in stack.of("no-secrets-in-config-maps"))


def test_config_map_key_ref_and_volume_with_a_credential():
    d = server()
    vllm(d)["env"].append(
        {"name": "HF_TOKEN", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "hub"}}},
    )
    pod_spec(d)["volumes"].append({"name": "cfg", "configMap": {"name": "files"}})
    objects = [d, config_map("settings", {"hub": "plain-literal"}), config_map("files", {"git.txt": GITHUB_PAT})]
    messages = findings(objects, "no-secrets-in-config-maps")
    assert any("reads env HF_TOKEN (key 'hub')" in m for m in messages), messages
    assert any("mounts token-like keys git.txt" in m for m in messages), messages


def test_config_maps_without_credentials_or_elsewhere_pass():
    d = server()
    vllm(d)["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    ok = [d, config_map("settings", {"VLLM_LOGGING_LEVEL": "INFO", "MAX_NUM_SEQS": "64"})]
    assert findings(ok, "no-secrets-in-config-maps") == []
    # The same name in another namespace is another ConfigMap.
    other = [d, config_map("settings", {"HF_TOKEN": "plain-literal"}, namespace="elsewhere")]
    assert findings(other, "no-secrets-in-config-maps") == []


def test_a_variable_set_twice_is_refused():
    d = server()
    vllm(d)["env"].append({"name": "HF_HUB_OFFLINE", "value": "0"})
    messages = findings([d], "env-set-once")
    assert len(messages) == 1 and "HF_HUB_OFFLINE" in messages[0]
    assert engine(d, "env-set-once")
    assert findings([GOOD_SERVER], "env-set-once") == []


def test_the_last_entry_of_a_variable_is_the_one_read():
    from policies.commands import literal_env

    c = {"env": [{"name": "A", "value": "1"}, {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    assert literal_env(c) == {}
    c = {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}
    assert literal_env(c) == {"A": "2"}


# --- host namespaces, hostPath, projected tokens -------------------------------------------------


@pytest.mark.parametrize(
    "change,expected",
    [
        ({"hostNetwork": True}, "hostNetwork: true"),
        ({"hostPID": True}, "hostPID: true"),
        ({"hostIPC": True}, "hostIPC: true"),
    ],
)
def test_host_namespaces_are_refused(change, expected):
    d = server()
    pod_spec(d).update(change)
    assert any(expected in m for m in findings([d], "no-host-access"))
    assert any(expected in m for m in engine(d, "no-host-access"))
    d = server()
    pod_spec(d).update(dict.fromkeys(change, False))
    assert findings([d], "no-host-access") == []


def test_host_path_volumes_and_host_ports_are_refused():
    d = server()
    pod_spec(d)["volumes"].append({"name": "node", "hostPath": {"path": "/var/lib/kubelet"}})
    vllm(d)["ports"] = [{"containerPort": 8000, "hostPort": 8000}]
    messages = findings([d], "no-host-access")
    assert len(messages) == 1
    assert "'/var/lib/kubelet'" in messages[0] and "node port 8000" in messages[0]


def test_projected_service_account_tokens_are_refused_unless_waived():
    d = server()
    pod_spec(d)["volumes"].append(
        {
            "name": "api",
            "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 600}}]},
        }
    )
    assert any("projected volume 'api'" in m for m in findings([d], "no-projected-api-token"))
    assert engine(d, "no-projected-api-token")
    d["spec"]["template"]["metadata"]["annotations"] = {
        EXCEPTION_ANNOTATION: "automountServiceAccountToken: the picker watches InferencePools through the API"
    }
    assert findings([d], "no-projected-api-token") == []


def test_projected_config_without_a_token_passes():
    d = server()
    pod_spec(d)["volumes"].append({"name": "cfg", "projected": {"sources": [{"configMap": {"name": "x"}}]}})
    assert findings([d], "no-projected-api-token") == []


# --- enforce-version -----------------------------------------------------------------------------


def namespace(version: str | None) -> dict:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    if version is not None:
        labels["pod-security.kubernetes.io/enforce-version"] = version
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving", "labels": labels}}


@pytest.mark.parametrize("version", [None, "latest", PSA_VERSION, "v1.40"])
def test_current_enforce_versions_pass(version):
    assert findings([namespace(version)], "namespace-pod-security-version") == []


@pytest.mark.parametrize("version,expected", [("v1.21", "older than"), ("1.33", "not 'latest'"), ("v2", "not")])
def test_old_or_unreadable_enforce_versions_are_refused(version, expected):
    messages = findings([namespace(version)], "namespace-pod-security-version")
    assert len(messages) == 1 and expected in messages[0]
    stack = analyze_stack([k8s_stack_entry(namespace(version))])
    assert stack.of("namespace-pod-security-version")


def test_a_pin_older_than_the_cluster_is_refused():
    eks = {"type": "aws:eks/cluster:Cluster", "name": "c", "props": {"version": "1.35"}}
    messages = findings([namespace(PSA_VERSION), eks], "namespace-pod-security-version")
    assert len(messages) == 1 and "cluster 'c' runs Kubernetes 1.35" in messages[0]
    gke = {"type": "gcp:container/cluster:Cluster", "name": "g", "props": {"minMasterVersion": "1.34.2-gke.100"}}
    assert findings([namespace(PSA_VERSION), gke], "namespace-pod-security-version")
    assert findings([namespace("v1.35"), eks], "namespace-pod-security-version") == []


def test_the_minimum_version_is_a_setting():
    config = {"namespace-pod-security-version": {"minimumVersion": "v1.20"}}
    assert findings([namespace("v1.25")], "namespace-pod-security-version", config) == []
    with pytest.raises(ValueError, match="minimumVersion"):
        check_objects([namespace("v1.25")], {"namespace-pod-security-version": {"minimumVersion": "latest-ish"}})


# --- allow-all beside default-deny ---------------------------------------------------------------


def policy(name: str, spec: dict, ns: str = "serving") -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


DENY = policy("default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})


@pytest.mark.parametrize(
    "spec,expected",
    [
        ({"podSelector": {}, "ingress": [{}]}, "ingress[0] admits every peer"),
        ({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}, "egress[0] admits every peer"),
        (
            {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]},
            "every address (0.0.0.0/0)",
        ),
        ({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]}, "every pod of every namespace"),
        (
            {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "llama-8b"}}, "ingress": [{}]},
            "the GPU servers of Deployment/llama-8b",
        ),
    ],
)
def test_allow_all_beside_default_deny_is_refused(spec, expected):
    objects = [DENY, policy("open", spec), GOOD_SERVER]
    messages = findings(objects, "network-policy-no-allow-all")
    assert len(messages) == 1 and expected in messages[0], messages
    stack = analyze_stack([k8s_stack_entry(o) for o in objects])
    assert stack.of("network-policy-no-allow-all")


@pytest.mark.parametrize(
    "spec",
    [
        {"podSelector": {}, "ingress": [{"ports": [{"port": 8000}]}]},
        {"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"a": "b"}}}]}]},
        {
            "podSelector": {},
            "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"a": "b"}}}]}],
        },
        {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]},
        # A chosen door (the in-cluster gateway proxy), not the servers.
        {"podSelector": {"matchLabels": {"gateway": "x"}}, "ingress": [{}]},
    ],
)
def test_narrow_holes_and_chosen_doors_pass(spec):
    assert findings([DENY, policy("hole", spec), GOOD_SERVER], "network-policy-no-allow-all") == []


def test_allow_all_without_a_default_deny_is_network_policy_presents_business():
    objects = [policy("open", {"podSelector": {}, "ingress": [{}]}), GOOD_SERVER]
    assert findings(objects, "network-policy-no-allow-all") == []
    # ... and a default-deny in another namespace does not count.
    assert findings([policy("default-deny", DENY["spec"], ns="other"), *objects], "network-policy-no-allow-all") == []


# --- LLMInferenceService -------------------------------------------------------------------------


def llm_isvc(spec: dict) -> dict:
    return {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": "llama", "namespace": "serving"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "path",
    [("template",), ("worker",), ("prefill", "template"), ("prefill", "worker"), ("router", "scheduler", "template")],
)
def test_every_pod_spec_of_an_llm_inference_service_is_walked(path):
    bad = copy.deepcopy(pod_spec(GOOD_SERVER))
    bad["hostNetwork"] = True
    bad["containers"][0]["env"].append({"name": "HF_TOKEN", "value": HF_TOKEN})
    spec: dict = {}
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = bad
    obj = llm_isvc(spec)
    where = "spec." + ".".join(path)
    assert any(where in m for m in findings([obj], "no-host-access"))
    assert findings([obj], "no-literal-secrets")
    assert engine(obj, "no-host-access")


def test_a_hardened_llm_inference_service_passes_the_security_rules():
    obj = llm_isvc({"replicas": 1, "template": copy.deepcopy(pod_spec(GOOD_SERVER))})
    for rule in ("no-host-access", "no-literal-secrets", "pod-security-context", "image-tag-pinned", "env-set-once"):
        assert findings([obj], rule) == [], rule


def test_the_good_gaps_fixture_passes_through_the_engine_and_is_walked():
    from policies.workloads import workload
    from tests.support.policy_engine import load_fixture

    objects = load_fixture("good", "gaps.yaml")
    isvc = workload(objects[0])
    assert isvc is not None and [p.where for p in isvc.pods] == ["spec.template"]
    for obj in objects:
        assert analyze_k8s(obj).violations == [], obj["metadata"]["name"]
    assert analyze_stack([k8s_stack_entry(o) for o in objects]).violations == []


# --- the program's own objects: clean as committed, each new rule fires on a broken copy ----------

NEW_RULES = (
    "env-set-once",
    "no-host-access",
    "no-projected-api-token",
    "no-secrets-in-config-maps",
    "namespace-pod-security-version",
    "network-policy-no-allow-all",
)


def _prod_server(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "llama-3-1-8b-instruct")


def _serving_namespace(objects: list[dict]) -> str:
    return _prod_server(objects)["metadata"]["namespace"]


def _dup_env(objects):
    c = pod_spec(_prod_server(objects))["containers"][0]
    c["env"].append({"name": "HF_HUB_OFFLINE", "value": "0"})


def _host_network(objects):
    pod_spec(_prod_server(objects))["hostNetwork"] = True


def _projected_token(objects):
    pod_spec(_prod_server(objects)).setdefault("volumes", []).append(
        {"name": "api", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    )


def _config_map_token(objects):
    server = _prod_server(objects)
    pod_spec(server)["containers"][0].setdefault("envFrom", []).append({"configMapRef": {"name": "leaky"}})
    objects.append(config_map("leaky", {"HF_TOKEN": HF_TOKEN}, namespace=_serving_namespace(objects)))


def _old_enforce_version(objects):
    ns = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == _serving_namespace(objects))
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] = "v1.21"


def _allow_all(objects):
    objects.append(policy("allow-all", {"podSelector": {}, "ingress": [{}]}, ns=_serving_namespace(objects)))


@pytest.fixture(scope="module")
def prod():
    from tests.support.committed import committed_stack
    from tests.support.policy_engine import cloud_records

    evaluation = committed_stack("prod")
    return evaluation.kubernetes_objects, cloud_records(evaluation)


def test_the_committed_prod_stack_breaks_none_of_the_new_rules(prod):
    objects, cloud = prod
    assert [v.message for v in check_objects(objects + cloud) if v.policy in NEW_RULES] == []


@pytest.mark.parametrize(
    "breaker,rule",
    [
        (_dup_env, "env-set-once"),
        (_host_network, "no-host-access"),
        (_projected_token, "no-projected-api-token"),
        (_config_map_token, "no-secrets-in-config-maps"),
        (_old_enforce_version, "namespace-pod-security-version"),
        (_allow_all, "network-policy-no-allow-all"),
    ],
)
def test_a_broken_copy_of_prod_is_caught_by_the_new_rule(prod, breaker, rule):
    objects, cloud = copy.deepcopy(prod)
    breaker(objects)
    assert rule in {v.policy for v in check_objects(objects + cloud) if v.level == "mandatory"}


def test_a_stack_on_a_newer_cluster_pins_that_version_and_passes():
    from offline_plan.mock_runtime import evaluate_stack
    from tests.support.policy_engine import cloud_records

    evaluation = evaluate_stack("dev", overrides={"cluster": {"kubernetesVersion": "1.34"}})
    namespaces = [o for o in evaluation.kubernetes_objects if o["kind"] == "Namespace"]
    assert namespaces
    for ns in namespaces:
        labels = ns["metadata"]["labels"]
        assert {labels[f"pod-security.kubernetes.io/{m}-version"] for m in ("enforce", "warn", "audit")} == {"v1.34"}
    verdicts = check_objects(evaluation.kubernetes_objects + cloud_records(evaluation))
    assert [v.message for v in verdicts if v.policy == "namespace-pod-security-version"] == []


@pytest.mark.parametrize("version,expected", [("1.34", "v1.34"), ("v1.33", "v1.33"), ("1.35.2-gke.100", "v1.35")])
def test_psa_version_of_a_kubernetes_version(version, expected):
    from common.pod_security import psa_version

    assert psa_version(version) == expected


def test_psa_version_refuses_what_is_not_a_version():
    from common.pod_security import psa_version

    with pytest.raises(ValueError, match=r"MAJOR\.MINOR"):
        psa_version("latest")
