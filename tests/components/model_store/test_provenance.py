"""Model provenance: the publisher's signature checked by the mirror Job, the servers' start check
against the manifest, its cost in the plan, and what plan.md says about each model."""

from __future__ import annotations

import functools
import json

import pytest

from components.model_store import signature as model_signature
from offline_plan.mock_runtime import evaluate_stack
from planner import plan as planner
from policies.check import check_objects
from stack_config import ConfigError
from tests.support.adapter_fixtures import offline_cache
from tests.support.model_plans import make_plan
from tests.support.stack_variants import DEV_MODELS

IDENTITY = "releases@publisher.example"
ISSUER = "https://accounts.google.com"
SIGSTORE = {"identity": IDENTITY, "issuer": ISSUER}
PEM = (
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEexampleexampleexample==\n"
    "-----END PUBLIC KEY-----\n"
)


@functools.cache
def dev_with(signature: str | None = None, verify: str = "sizes", load_from: str | None = None):
    model = {**DEV_MODELS[0], "verifyAtStart": verify}
    if signature is not None:
        model["signature"] = json.loads(signature)
    overrides = {"exposure": {}, "models": [model]}
    if load_from:
        overrides["modelStore"] = {"loadFrom": load_from}
    with offline_cache():
        return evaluate_stack("dev", overrides=overrides)


def kind(ev, k: str) -> list[dict]:
    return [o for o in ev.kubernetes_objects if o["kind"] == k]


def server_pod(ev) -> dict:
    [d] = [
        o for o in kind(ev, "Deployment") if o["metadata"]["labels"].get("llm-serving.io/component") == "vllm-server"
    ]
    return d["spec"]["template"]["spec"]


def mirror_pod(ev) -> dict:
    [job] = [o for o in kind(ev, "Job") if o["metadata"]["labels"].get("llm-serving.io/component") == "model-mirror"]
    return job["spec"]["template"]["spec"]


# The signature ------------------------------------------------------------------------------------


def test_a_sigstore_signature_is_verified_between_download_and_manifest():
    ev = dev_with(json.dumps(SIGSTORE))
    pod = mirror_pod(ev)
    # dev has a bucket: the sync runs last, after the seal, so an unverified folder never reaches it.
    fetch, verify, seal = pod["initContainers"]
    assert (fetch["name"], verify["name"], seal["name"]) == ("fetch", "verify-signature", "seal")
    assert [c["name"] for c in pod["containers"]] == ["sync"]
    assert fetch["command"][-3:] == ["--include", "model.sig", "--defer-manifest"]
    folder = fetch["command"][fetch["command"].index("--local-dir") + 1]
    assert verify["image"] == model_signature.VERIFIER_IMAGE
    assert verify["args"] == [
        "verify",
        "sigstore",
        folder,
        "--signature",
        f"{folder}/model.sig",
        "--ignore-paths",
        f"{folder}/.cache",
        "--identity",
        IDENTITY,
        "--identity_provider",
        ISSUER,
    ]
    # The verifier reads the weights (read-only) and keeps Sigstore's trust root on /tmp only.
    assert {m["mountPath"]: bool(m.get("readOnly")) for m in verify["volumeMounts"]} == {"/models": True, "/tmp": False}
    assert verify["securityContext"]["readOnlyRootFilesystem"] is True
    assert seal["command"][2:5] == ["seal", "--local-dir", folder]
    assert IDENTITY in seal["command"][-1] and ISSUER in seal["command"][-1]
    # The whole stack still passes the pack (pinned images, resources, probes not needed for Jobs).
    assert [v for v in check_objects(ev.kubernetes_objects) if v.level == "mandatory"] == []


def test_a_public_key_reaches_the_verifier_from_a_config_map():
    ev = dev_with(json.dumps({"method": "key", "publicKey": PEM}))
    verify = mirror_pod(ev)["initContainers"][1]
    assert verify["args"][-2:] == ["--public_key", f"{model_signature.TRUST_MOUNT_PATH}/{model_signature.TRUST_FILE}"]
    [trust] = [o for o in kind(ev, "ConfigMap") if o["metadata"]["name"].endswith("signature-trust")]
    assert trust["data"] == {model_signature.TRUST_FILE: PEM}
    volume = next(v for v in mirror_pod(ev)["volumes"] if v["name"] == "signature-trust")
    assert volume["configMap"]["name"] == trust["metadata"]["name"]


def test_unsigned_models_keep_the_single_step_mirror():
    pod = mirror_pod(dev_with())
    assert [c["name"] for c in pod["initContainers"]] == ["fetch"]
    assert "--defer-manifest" not in pod["initContainers"][0]["command"]


@pytest.mark.parametrize(
    "signature,message",
    [
        ({"identity": IDENTITY}, "method sigstore needs issuer"),
        ({"method": "key"}, "method key needs publicKey"),
        ({"method": "key", "publicKey": PEM, "identity": IDENTITY}, "identity apply to another method"),
        ({"method": "key", "publicKey": PEM.replace("PUBLIC", "EC PRIVATE")}, "private key"),
        ({"method": "certificate", "certificateChain": "not pem"}, "is not PEM text"),
        ({**SIGSTORE, "file": "../model.sig"}, "not a path inside the repo"),
    ],
)
def test_signature_config_errors_name_the_fix(signature, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        make_plan({**DEV_MODELS[0], "signature": signature})


# The servers' start check and its cost --------------------------------------------------------------


def test_servers_check_sizes_against_the_manifest_before_loading():
    pod = server_pod(dev_with())
    [check] = pod["initContainers"]
    assert check["command"][2:] == ["verify", "--local-dir", check["command"][4], "--sizes-only"]
    [script] = [v for v in pod["volumes"] if v["name"] == "weights-check"]
    assert script["configMap"]["name"].endswith("mirror-script")


def test_the_sha256_option_costs_its_read_in_the_estimate_and_the_budget():
    sizes = make_plan({**DEV_MODELS[0]})
    full = make_plan({**DEV_MODELS[0], "verifyAtStart": "sha256"})
    expected = full.weights_bytes / min(full.read_bytes_per_second, planner.HASH_BYTES_PER_SECOND)
    assert full.start_check_seconds == pytest.approx(expected) and sizes.start_check_seconds == 0
    assert full.load_seconds == pytest.approx(sizes.load_seconds + expected)
    assert full.startup_budget_seconds >= full.load_seconds * planner.STARTUP_MARGIN
    # 16 GB of Llama 3.1 8B at 250 MB/s: about a minute more.
    assert 55 < expected < 70
    pod = server_pod(dev_with(verify="sha256"))
    assert "--sizes-only" not in pod["initContainers"][0]["command"]


def test_streaming_from_the_bucket_has_no_local_copy_to_check():
    ev = dev_with(load_from="bucket")
    assert "initContainers" not in server_pod(ev)
    assert "no start check (streamed from the bucket)" in ev.outputs["sizing"][0]["provenance"]


def test_plan_says_which_models_are_signed():
    unsigned = dev_with().outputs["sizing"][0]["provenance"]
    assert "unsigned: no publisher signature verified" in unsigned and "start check: sizes" in unsigned
    signed = dev_with(json.dumps(SIGSTORE)).outputs["sizing"][0]["provenance"]
    assert (
        f"signature verified by the mirror Job: sigstore signature model.sig by {IDENTITY} (issuer {ISSUER})" in signed
    )
