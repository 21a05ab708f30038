"""API access: an exposed stack needs a key (or an explicit waiver), keys rotate, and the pack's
authenticated-exposure rule passes the committed stacks and catches them with the key removed."""

from __future__ import annotations

import copy
import json

import pytest

from common import contract
from offline_plan.mock_runtime import evaluate, redact_secrets, stack_file_config, whole_numbers
from policies.check import check_objects
from stack_config import PROJECT
from tests.support.adapter_fixtures import offline_cache
from tests.support.committed import committed_stack
from tests.support.policy_engine import analyze_stack, k8s_stack_entry, load_fixture
from tests.support.stack_variants import GATEWAY, variant

RULE = "authenticated-exposure"
HF = "<secret hfToken placeholder>"


def evaluate_with(stack: str, secrets: dict[str, str], overrides: dict | None = None, raise_errors: bool = True):
    """The stack file with exactly these secrets (evaluate_stack would stand in for a missing apiKey)."""
    config, secret_keys = stack_file_config(stack)
    for key, value in (overrides or {}).items():
        config[f"{PROJECT}:{key}"] = json.dumps(value)
    for key, value in secrets.items():
        config[f"{PROJECT}:{key}"] = value
        secret_keys.append(f"{PROJECT}:{key}")
    with offline_cache():
        return evaluate(stack, config, secret_keys, raise_errors=raise_errors)


def committed(stack: str):
    return committed_stack(stack)


def pack_input(ev) -> list[dict]:
    """What the offline plan hands the pack: Kubernetes objects plus the Helm releases (the entrance's
    InferencePools are rendered by the picker chart) and cloud resources as records."""
    return ev.kubernetes_objects + [
        {"type": r.type, "name": r.name, "props": whole_numbers(redact_secrets(r.inputs))}
        for r in ev.resources
        if r.custom and not r.is_kubernetes_object
    ]


def servers(objects: list[dict]) -> list[dict]:
    return [
        o
        for o in objects
        if o.get("kind") in ("Deployment", "LeaderWorkerSet")
        and o["metadata"]["labels"].get(contract.LABEL_COMPONENT) == "vllm-server"
    ]


def pod_templates(obj: dict) -> list[dict]:
    if obj["kind"] == "Deployment":
        return [obj["spec"]["template"]]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [lwt["leaderTemplate"], lwt["workerTemplate"]]


def without_key(objects: list[dict]) -> list[dict]:
    """The same objects with the control removed: no server reads an API key."""
    out = copy.deepcopy(objects)
    for obj in servers(out):
        for template in pod_templates(obj):
            for c in template["spec"]["containers"]:
                c["env"] = [
                    e for e in c.get("env", []) if e["name"] not in (contract.API_KEY_ENV, contract.API_KEY_NEXT_ENV)
                ]
    return out


def rule_findings(objects: list[dict]) -> list:
    return [v for v in check_objects(objects) if v.policy == RULE]


# The committed stacks and the per-model gateway variant ---------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_stack_passes_and_fails_with_the_key_removed(stack):
    objects = pack_input(committed(stack))
    assert servers(objects), "the stack serves nothing through vLLM?"
    assert rule_findings(objects) == []
    broken = rule_findings(without_key(objects))
    assert {v.name for v in broken} == {o["metadata"]["name"] for o in servers(objects)}
    assert all(v.level == "mandatory" for v in broken)
    assert "InferencePool of release" in broken[0].message and "asks for no API key" in broken[0].message


def test_the_per_model_gateway_route_is_exposure_too():
    objects = variant(GATEWAY).kubernetes_objects
    assert rule_findings(objects) == []
    [v] = rule_findings(without_key(objects))
    assert "HTTPRoute/llama-3-1-8b-instruct -> Service/llama-3-1-8b-instruct-api" in v.message


# The config refuses an exposed stack without a key ---------------------------------------------------


def test_exposed_stack_without_api_key_is_refused_with_the_fix():
    ev = evaluate_with("dev", {"hfToken": HF}, raise_errors=False)
    message = str(ev.error)
    assert "Pulumi.dev.yaml: apiKey: exposure.entrance puts the models on a Gateway, but no API key is set" in message
    assert "pulumi config set --secret apiKey <key> -s dev" in message
    assert "exposure.allowUnauthenticated: true" in message


def test_cluster_only_stack_needs_no_key():
    ev = evaluate_with(
        "dev",
        {"hfToken": HF},
        overrides={
            "exposure": {},
            "models": [
                {
                    "repo": "meta-llama/Llama-3.1-8B-Instruct",
                    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
                    "name": "llama-3-1-8b-instruct",
                    "gated": True,
                    "pool": "l4",
                    "maxModelLen": 8192,
                }
            ],
        },
    )
    assert ev.error is None
    assert rule_findings(ev.kubernetes_objects) == []


def test_allow_unauthenticated_is_a_visible_waiver_the_rule_accepts():
    overrides = {"exposure": {**_committed_exposure("dev"), "allowUnauthenticated": True}}
    ev = evaluate_with("dev", {"hfToken": HF}, overrides=overrides)
    objects = pack_input(ev)
    [server] = servers(objects)
    template = server["spec"]["template"]
    assert template["metadata"]["annotations"][contract.ANNOTATION_ALLOW_UNAUTHENTICATED] == "true"
    assert not any(e["name"] == contract.API_KEY_ENV for e in template["spec"]["containers"][0]["env"])
    assert rule_findings(objects) == []
    # The waiver removed, the rule catches the open server.
    del template["metadata"]["annotations"][contract.ANNOTATION_ALLOW_UNAUTHENTICATED]
    assert [v.name for v in rule_findings(objects)] == [server["metadata"]["name"]]


def _committed_exposure(stack: str) -> dict:
    config, _ = stack_file_config(stack)
    return json.loads(config[f"{PROJECT}:exposure"])


# Rotation: two keys at once ------------------------------------------------------------------------


def test_a_second_key_is_passed_to_vllm_from_the_same_secret():
    ev = evaluate_with("dev", {"hfToken": HF, "apiKey": "<secret a>", "apiKeyNext": "<secret b>"})
    objects = pack_input(ev)
    [server] = servers(objects)
    c = server["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    secret_name = env[contract.API_KEY_ENV]["valueFrom"]["secretKeyRef"]["name"]
    assert env[contract.API_KEY_NEXT_ENV]["valueFrom"]["secretKeyRef"] == {"name": secret_name, "key": "api-key-next"}
    assert c["args"][-3:] == ["--api-key", f"$({contract.API_KEY_ENV})", f"$({contract.API_KEY_NEXT_ENV})"]
    [secret] = [o for o in objects if o.get("kind") == "Secret" and o["metadata"]["name"] == secret_name]
    assert set(secret["stringData"]) == {"api-key", "api-key-next"}
    # Neither key's value reaches a manifest; the whole pack is content, the literal-secrets rule too.
    assert "<secret a>" not in json.dumps(objects) and "<secret b>" not in json.dumps(objects)
    assert [v for v in check_objects(objects) if v.level == "mandatory"] == []


def test_without_rotation_the_key_stays_out_of_the_command_line():
    [server] = servers(committed("dev").kubernetes_objects)
    assert "--api-key" not in server["spec"]["template"]["spec"]["containers"][0]["args"]


def test_next_key_alone_is_refused():
    ev = evaluate_with("dev", {"hfToken": HF, "apiKeyNext": "<secret b>"}, raise_errors=False)
    assert "apiKeyNext: is the second key of a rotation and needs apiKey beside it" in str(ev.error)


# The rule on hand-written manifests -----------------------------------------------------------------

BAD = load_fixture("bad", "authenticated-exposure.yaml")
ROUTE, SERVICE, SERVER = BAD


def test_bad_fixture_is_caught_and_only_by_this_rule():
    result = analyze_stack([k8s_stack_entry(o) for o in BAD])
    assert result.policies() == {RULE}
    [d] = result.of(RULE)
    assert d.message.startswith(
        "Deployment/open-8b (spec.template) is reachable from a Gateway through "
        "HTTPRoute/open-8b -> Service/open-8b-api but asks for no API key"
    )
    assert d.message.endswith(".")


def _with(server_change) -> list:
    fixed = copy.deepcopy(SERVER)
    server_change(fixed["spec"]["template"])
    return [k8s_stack_entry(o) for o in (ROUTE, SERVICE, fixed)]


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t["spec"]["containers"][0]["env"].append(
            {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "api-key"}}}
        ),
        lambda t: t["spec"]["containers"][0]["args"].extend(["--api-key", "$(KEY)"]),
        lambda t: (
            t["metadata"].setdefault("annotations", {}).update({contract.ANNOTATION_ALLOW_UNAUTHENTICATED: "true"})
        ),
    ],
    ids=["key-from-secret", "key-flag", "waiver"],
)
def test_a_key_or_the_waiver_satisfies_the_rule(change):
    assert analyze_stack(_with(change)).of(RULE) == []


def test_a_literal_key_env_or_a_false_waiver_is_no_evidence():
    literal = _with(lambda t: t["spec"]["containers"][0]["env"].append({"name": "VLLM_API_KEY", "value": ""}))
    assert len(analyze_stack(literal).of(RULE)) == 1
    false = _with(
        lambda t: (
            t["metadata"].setdefault("annotations", {}).update({contract.ANNOTATION_ALLOW_UNAUTHENTICATED: "false"})
        )
    )
    assert len(analyze_stack(false).of(RULE)) == 1


def test_a_service_no_route_names_is_not_exposure():
    assert analyze_stack([k8s_stack_entry(o) for o in (SERVICE, SERVER)]).of(RULE) == []
    other = copy.deepcopy(ROUTE)
    other["spec"]["rules"][0]["backendRefs"][0]["name"] = "something-else"
    assert analyze_stack([k8s_stack_entry(o) for o in (other, SERVICE, SERVER)]).of(RULE) == []
