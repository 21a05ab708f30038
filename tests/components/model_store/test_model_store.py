"""The model store under the SDK's mock runtime: what it asks Kubernetes for, validated strictly."""

from __future__ import annotations

import itertools
import json
import re

import pulumi
import pytest

import stack_config as config
from common import contract
from components.cluster.interface import GpuPlacement, ServiceAccountBinding, pool_node_labels
from components.model_store import store as ms
from offline_plan import mock_runtime
from planner.plan import model_path
from tests.support import schemas
from tests.support.model_store_runs import (
    LLAMA_8B_BYTES,
    NAMESPACE,
    REPO,
    REV,
    TOKEN,
    aws_bucket,
    evaluate,
    gcs_bucket,
    objects,
    only,
)
from tests.support.unwrap import unwrap_secrets


def pod_containers(job: dict) -> list[dict]:
    spec = job["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def fetch_container(job: dict) -> dict:
    return next(c for c in pod_containers(job) if c["name"] == "fetch")


def strings_outside_secrets(value) -> list[str]:
    if mock_runtime.is_secret_value(value):
        return []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *strings_outside_secrets(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings_outside_secrets(v)]
    return [str(value)]


# --- the Job is pinned, bounded and awaited -------------------------------------------------


def test_mirror_command_pins_the_commit_and_never_a_branch():
    evaluation, _ = evaluate()
    job = only(evaluation, "Job")
    command = fetch_container(job)["command"]
    revision = command[command.index("--revision") + 1]
    assert revision == REV and re.fullmatch(r"[0-9a-f]{40}", revision)
    assert command[command.index("--repo") + 1] == REPO
    # The files land where servers look for them: the same path the plan computes.
    assert command[command.index("--local-dir") + 1] == f"{contract.MODEL_MOUNT_PATH}/{REPO}/{REV}"
    # Only the servable files are fetched: every glob of the contract, as repeated flags.
    pairs = list(itertools.pairwise(command))
    assert [v for k, v in pairs if k == "--include"] == list(contract.MODEL_FILE_INCLUDE)
    assert [v for k, v in pairs if k == "--exclude"] == list(contract.MODEL_FILE_EXCLUDE)
    assert "original/*" in contract.MODEL_FILE_EXCLUDE
    every_word = " ".join(str(w) for c in pod_containers(job) for w in c["command"])
    for branch in ("main", "master", "refs/", "HEAD"):
        assert not re.search(rf"(^|[\s/=@]){re.escape(branch)}($|\s)", every_word), branch


def test_job_is_bounded_awaited_and_kept():
    evaluation, stores = evaluate()
    job = only(evaluation, "Job")
    spec = job["spec"]
    assert 1 <= spec["backoffLimit"] <= 6
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    # Pulumi must wait for completion (servers depend on it) and the Job must not vanish afterwards.
    assert "pulumi.com/skipAwait" not in job["metadata"].get("annotations", {})
    assert "ttlSecondsAfterFinished" not in spec
    # 16 GB: 2 attempts x (321 s Hub + 80 s re-hash) + 900 s overhead = 1702 s -> floor of 1800 s.
    assert spec["activeDeadlineSeconds"] == ms.MIN_DEADLINE_SECONDS
    assert stores["llama-3-1-8b-instruct"].deadline_seconds == spec["activeDeadlineSeconds"]


def test_deadline_and_disk_grow_with_the_model():
    big = 140_000_000_000
    evaluation, _ = evaluate(
        bucket=aws_bucket(), stores=[{"weights_bytes": big, "load_from": "bucket", "storage_class": None}]
    )
    job = only(evaluation, "Job")
    # 140 GB: 2 x (2800 s Hub + 700 s re-hash + 1400 s upload) + 900 s = 10700 s -> whole minutes.
    assert job["spec"]["activeDeadlineSeconds"] == 10740
    fetch = fetch_container(job)
    assert fetch["resources"]["requests"]["cpu"] == "4"
    # Streaming from the bucket, the download is staged on a per-pod claim sized like the volume:
    # ceil(140e9 x 1.25 / GiB) = 163 GiB, of the cluster's default class (no storageClassName).
    weights = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == ms.WEIGHTS_VOLUME)
    claim = weights["ephemeral"]["volumeClaimTemplate"]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "163Gi"}}}
    assert claim["metadata"]["labels"][contract.LABEL_REVISION] == REV


def test_staging_on_a_volume_keeps_node_disk_requests_small():
    """A 70B model (~141 GB) must schedule on a system node with a 200 GiB disk."""
    # Llama-3.x-70B's index metadata.total_size (model-metadata/meta-llama/Llama-3.3-70B-Instruct/*/weights.json).
    llama_70b = 141_107_412_992
    evaluation, _ = evaluate(
        bucket=aws_bucket(),
        stores=[
            {"weights_bytes": llama_70b, "load_from": "bucket", "storage_class": None, "staging_storage_class": "gp3"}
        ],
    )
    job = only(evaluation, "Job")
    for container in pod_containers(job):
        requested = container["resources"]["requests"]["ephemeral-storage"]
        assert requested == f"{ms.SCRATCH_GIB}Gi", container["name"]
        assert int(requested.removesuffix("Gi")) < 50
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["scratch"]["emptyDir"] == {"sizeLimit": f"{ms.SCRATCH_GIB}Gi"}
    claim = volumes[ms.WEIGHTS_VOLUME]["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "gp3"
    assert claim["resources"]["requests"]["storage"] == f"{ms.volume_size_gib(llama_70b, 1.25)}Gi" == "165Gi"
    # The fetch step writes the weights there, the sync step reads them from there.
    for container in pod_containers(job):
        mount = next(m for m in container["volumeMounts"] if m["name"] == ms.WEIGHTS_VOLUME)
        assert mount["mountPath"] == contract.MODEL_MOUNT_PATH


def test_mirror_runs_on_cpu_nodes_unless_placed_on_a_gpu_pool():
    evaluation, _ = evaluate()
    pod = only(evaluation, "Job")["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod

    placement = GpuPlacement(
        pool="h100", gpu="H100-80GB", gpus_per_node=8, max_nodes=2, node_labels=pool_node_labels("h100", "H100-80GB")
    )
    evaluation, _ = evaluate(stores=[{"placement": placement}])
    pod = only(evaluation, "Job")["spec"]["template"]["spec"]
    assert {t["key"] for t in pod["tolerations"]} == {contract.GPU_TAINT_KEY}
    assert pod["nodeSelector"] == pool_node_labels("h100", "H100-80GB")


def test_mirror_reaches_the_hub():
    evaluation, _ = evaluate()
    for container in pod_containers(only(evaluation, "Job")):
        assert "HF_HUB_OFFLINE" not in {e["name"] for e in container.get("env", [])}


# --- the token ------------------------------------------------------------------------------


def test_ungated_model_gets_no_token_secret():
    evaluation, stores = evaluate()
    assert objects(evaluation, "Secret") == []
    assert stores["llama-3-1-8b-instruct"].hf_token_secret is None
    assert contract.HF_TOKEN_KEY not in {e["name"] for e in fetch_container(only(evaluation, "Job"))["env"]}


def test_gated_model_without_token_fails_in_config_with_the_command_to_fix_it():
    values = {
        "llm-serving:cloud": "aws",
        "llm-serving:pools": json.dumps([{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8}]),
        "llm-serving:models": json.dumps([{"repo": REPO, "revision": REV, "gated": True, "pool": "h100"}]),
    }
    with pytest.raises(config.ConfigError) as err:
        mock_runtime.run_in_mocks(config.load, stack="dev", config=values)
    assert "pulumi config set --secret hfToken" in str(err.value)
    assert "-s dev" in str(err.value)


def test_token_from_secret_config_stays_secret_end_to_end():
    """Config -> ModelStore -> Secret: the token is a secret in the recorded inputs and nowhere plain."""
    values = {
        "llm-serving:cloud": "aws",
        "llm-serving:pools": json.dumps([{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8}]),
        "llm-serving:models": json.dumps([{"repo": REPO, "revision": REV, "gated": True, "pool": "h100"}]),
        "llm-serving:hfToken": TOKEN,
    }

    def program():
        loaded = config.load()
        shared = ms.ServingNamespace("serving", ms.ServingNamespaceArgs(NAMESPACE, aws_bucket()))
        ms.ModelStore(
            "llama",
            ms.ModelStoreArgs(
                repo=REPO,
                revision=REV,
                served_name="llama-3-1-8b-instruct",
                weights_bytes=LLAMA_8B_BYTES,
                model_path=model_path(REPO, REV),
                namespace=shared.namespace,
                writer_service_account=shared.writer_service_account,
                reader_service_account=shared.reader_service_account,
                downloader_image=loaded.config.modelStore.downloaderImage,
                storage_class="efs-sc",
                bucket=aws_bucket(),
                gated=True,
                hf_token=loaded.hf_token,
            ),
        )

    evaluation = mock_runtime.run_in_mocks(program, stack="dev", config=values, secret_keys=["llm-serving:hfToken"])
    secret = next(r for r in evaluation.resources if r.type == "kubernetes:core/v1:Secret")
    assert mock_runtime.secret_paths(secret.inputs) == ["stringData"]
    assert unwrap_secrets(secret.inputs["stringData"]) == {contract.HF_TOKEN_KEY: TOKEN}
    for resource in evaluation.resources:
        assert not any(TOKEN in s for s in strings_outside_secrets(resource.inputs)), resource.name
    # What a plan file shows (the redacted objects) never holds the token either.
    assert TOKEN not in json.dumps(evaluation.kubernetes_objects)
    env = fetch_container(only(evaluation, "Job"))["env"]
    token_env = next(e for e in env if e["name"] == contract.HF_TOKEN_KEY)
    assert "value" not in token_env
    assert token_env["valueFrom"]["secretKeyRef"] == {
        "name": "llama-3-1-8b-instruct-hf-token",
        "key": contract.HF_TOKEN_KEY,
    }


def test_plain_token_passed_by_mistake_is_still_stored_as_a_secret():
    evaluation, _ = evaluate(stores=[{"gated": True, "hf_token": TOKEN}])
    secret = next(r for r in evaluation.resources if r.type == "kubernetes:core/v1:Secret")
    assert mock_runtime.secret_paths(secret.inputs) == ["stringData"]
    assert only(evaluation, "Secret")["stringData"] == {"HF_TOKEN": mock_runtime.REDACTED}


def test_gated_store_without_token_is_refused():
    with pytest.raises(ValueError, match="gated"):
        evaluate(stores=[{"gated": True, "hf_token": None}])


# --- the volume -----------------------------------------------------------------------------


def test_volume_is_rwx_with_the_derived_size():
    evaluation, stores = evaluate()
    pvc = only(evaluation, "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == "efs-sc"
    # ceil(16,060,522,496 x 1.25 / 1 GiB) = ceil(18.70) = 19 GiB.
    assert pvc["spec"]["resources"]["requests"]["storage"] == "19Gi"
    assert pvc["metadata"]["annotations"][contract.ANNOTATION_PLANNED_STORAGE] == "19Gi"
    store = stores["llama-3-1-8b-instruct"]
    job_volume = next(
        v for v in only(evaluation, "Job")["spec"]["template"]["spec"]["volumes"] if v["name"] == ms.WEIGHTS_VOLUME
    )
    assert job_volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"] == store.claim_name


def test_volume_size_floor_and_headroom():
    assert ms.volume_size_gib(1_000_000, 1.25) == ms.MIN_VOLUME_GIB
    assert ms.volume_size_gib(140_000_000_000, 1.25) == 163
    assert ms.volume_size_gib(140_000_000_000, 2.0) == 261


def test_servers_get_a_read_only_mount_at_the_contract_path():
    _, stores = evaluate()
    store = stores["llama-3-1-8b-instruct"]
    assert store.volume_spec() == {
        "name": ms.WEIGHTS_VOLUME,
        "persistentVolumeClaim": {"claimName": "llama-3-1-8b-instruct-weights", "readOnly": True},
    }
    assert store.volume_mount() == {"name": ms.WEIGHTS_VOLUME, "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": True}
    assert store.model_path.startswith(contract.MODEL_MOUNT_PATH + "/")
    assert store.load_format is None
    assert isinstance(store.mirror_job, pulumi.CustomResource)


def test_existing_claim_is_mounted_not_created_and_still_verified():
    evaluation, stores = evaluate(
        stores=[{"load_from": "existing-claim", "existing_claim": "team-models", "storage_class": None}]
    )
    assert objects(evaluation, "PersistentVolumeClaim") == []
    job = only(evaluation, "Job")
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == ms.WEIGHTS_VOLUME)
    assert volume["persistentVolumeClaim"]["claimName"] == "team-models"
    assert "fetch" in fetch_container(job)["command"]
    assert stores["llama-3-1-8b-instruct"].volume_spec()["persistentVolumeClaim"]["claimName"] == "team-models"


# --- the bucket -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bucket, image, tool",
    [
        (aws_bucket(), ms.AWS_CLI_IMAGE, "aws s3 sync"),
        (gcs_bucket(), ms.GCLOUD_IMAGE, "gcloud storage rsync"),
    ],
)
def test_sync_runs_after_verification_with_a_pinned_cli(bucket, image, tool):
    evaluation, _ = evaluate(bucket=bucket)
    pod = only(evaluation, "Job")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["fetch"]
    (sync,) = pod["containers"]
    assert sync["image"] == image and not image.endswith(":latest")
    script = sync["command"][-1]
    destination = f"{bucket.scheme}://llm-serving-dev-models/models/{REPO}/{REV}"
    assert f"DST={destination}\n" in script
    lines = script.strip().splitlines()
    sync_line = next(i for i, line in enumerate(lines) if line.startswith(tool))
    # The download bookkeeping and the manifest stay out of the bulk sync ...
    assert ".cache" in lines[sync_line] and "manifest" in lines[sync_line]
    # ... and the manifest is uploaded after it, create-only, so its presence in the bucket means a
    # complete copy (what re-runs do is run for real in tests/components/model_store/test_mirror_sync.py).
    upload = next(i for i, line in enumerate(lines) if '"$SRC/manifest.json"' in line and line.startswith("if !"))
    assert upload > sync_line and ("--if-generation-match=0" in lines[upload] or "--if-none-match '*'" in lines[upload])
    # Nothing is synced unless the fetch step left a verified manifest.
    assert any(line.startswith('test -f "$SRC/manifest.json"') for line in lines[:sync_line])
    # It never writes the weights (its other mounts are its scratch HOME and /tmp emptyDirs).
    assert all(m.get("readOnly") for m in sync["volumeMounts"] if m["mountPath"] == contract.MODEL_MOUNT_PATH)
    assert pod["serviceAccountName"] == "model-writer"


def test_bucket_load_streams_with_runai_and_creates_no_volume():
    evaluation, stores = evaluate(bucket=aws_bucket(), stores=[{"load_from": "bucket", "storage_class": None}])
    assert objects(evaluation, "PersistentVolumeClaim") == []
    store = stores["llama-3-1-8b-instruct"]
    assert store.load_format == "runai_streamer"
    assert store.volume_spec() is None and store.volume_mount() is None
    assert store.weights_location is store.weights_uri


def test_service_accounts_carry_the_cloud_bindings():
    evaluation, _ = evaluate(bucket=aws_bucket())
    accounts = {o["metadata"]["name"]: o for o in objects(evaluation, "ServiceAccount")}
    assert set(accounts) == {"model-writer", "model-reader"}
    assert accounts["model-writer"]["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/writer"
    }
    assert all(a["metadata"]["namespace"] == NAMESPACE for a in accounts.values())


def test_binding_in_another_namespace_is_refused():
    bucket = aws_bucket()
    bucket.writer = ServiceAccountBinding("elsewhere", "model-writer", {})
    with pytest.raises(ValueError, match=r"modelStore\.namespace"):
        evaluate(bucket=bucket)


# --- everything touching the model is labelled; everything validates --------------------------


def test_every_model_object_carries_the_revision():
    evaluation, _ = evaluate(bucket=aws_bucket(), stores=[{"gated": True, "hf_token": TOKEN}])
    touching = [o for o in evaluation.kubernetes_objects if o["kind"] not in ("Namespace", "ServiceAccount")]
    assert {o["kind"] for o in touching} == {"Secret", "PersistentVolumeClaim", "ConfigMap", "Job"}
    for obj in touching:
        assert obj["metadata"]["labels"][contract.LABEL_REVISION] == REV, obj["kind"]
        assert obj["metadata"]["annotations"][contract.ANNOTATION_REPO] == REPO, obj["kind"]
    template = only(evaluation, "Job")["spec"]["template"]["metadata"]
    assert template["labels"][contract.LABEL_REVISION] == REV


def test_two_models_share_one_namespace_and_its_accounts():
    other_rev = "1" * 40
    evaluation, _ = evaluate(
        bucket=gcs_bucket(),
        stores=[
            {},
            {
                "repo": "Qwen/Qwen3-8B",
                "revision": other_rev,
                "served_name": "qwen3-8b",
                "model_path": model_path("Qwen/Qwen3-8B", other_rev),
            },
        ],
    )
    assert len(objects(evaluation, "Namespace")) == 1
    assert len(objects(evaluation, "ServiceAccount")) == 2
    assert len(objects(evaluation, "Job")) == 2
    names = [o["metadata"]["name"] for o in evaluation.kubernetes_objects if o["kind"] != "Namespace"]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", ["volume", "existing-claim", "bucket-s3", "gcs-gated-gpu", "bucket-gcs-staged-gpu"])
def test_every_emitted_object_validates_strictly(case):
    placement = GpuPlacement(
        pool="l4", gpu="L4", gpus_per_node=1, max_nodes=1, node_labels=pool_node_labels("l4", "L4")
    )
    bucket, overrides = {
        "volume": (None, {}),
        "existing-claim": (
            None,
            {"load_from": "existing-claim", "existing_claim": "team-models", "storage_class": None},
        ),
        "bucket-s3": (aws_bucket(), {"load_from": "bucket", "storage_class": None}),
        "gcs-gated-gpu": (gcs_bucket(), {"gated": True, "hf_token": TOKEN, "placement": placement}),
        "bucket-gcs-staged-gpu": (
            gcs_bucket(),
            {
                "load_from": "bucket",
                "storage_class": None,
                "gated": True,
                "hf_token": TOKEN,
                "placement": placement,
                "staging_storage_class": "standard-rwo",
            },
        ),
    }[case]
    evaluation, _ = evaluate(bucket=bucket, stores=[overrides])
    raw = [unwrap_secrets(r.inputs) for r in evaluation.resources if r.is_kubernetes_object]
    assert raw, "nothing was emitted"
    schemas.validate_all(raw)


def test_k8s_names_stay_dns_labels():
    name = ms.k8s_name("a" * 63, f"mirror-{REV[:12]}")
    assert len(name) <= 63 and name.endswith(f"-mirror-{REV[:12]}")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)


def test_pulumi_waits_as_long_as_the_job_may_run():
    """The provider's default wait for a Job is 10 minutes; the mirror's own deadline must win."""
    seen: dict[str, pulumi.ResourceOptions] = {}

    def capture(args: pulumi.ResourceTransformationArgs):
        seen[args.name] = args.opts
        return

    def program():
        shared = ms.ServingNamespace("serving", ms.ServingNamespaceArgs(NAMESPACE, None))
        ms.ModelStore(
            "big",
            ms.ModelStoreArgs(
                repo=REPO,
                revision=REV,
                served_name="big",
                weights_bytes=140_000_000_000,
                model_path=model_path(REPO, REV),
                namespace=shared.namespace,
                writer_service_account=shared.writer_service_account,
                reader_service_account=shared.reader_service_account,
                downloader_image="vllm/vllm-openai:v0.32.0",
                storage_class="efs-sc",
            ),
            opts=pulumi.ResourceOptions(transformations=[capture]),
        )

    evaluation = mock_runtime.run_in_mocks(program)
    deadline = int(only(evaluation, "Job")["spec"]["activeDeadlineSeconds"])
    # 140 GB, no bucket: 2 x (2800 s + 700 s) + 900 s = 7900 s -> 7920 s.
    assert deadline == 7920
    timeouts = seen["big-mirror"].custom_timeouts
    # Pulumi outwaits the Job by a margin, so the Job's own failure (DeadlineExceeded) is reported.
    assert ms.PULUMI_WAIT_MARGIN_SECONDS >= 300
    wait = deadline + ms.PULUMI_WAIT_MARGIN_SECONDS
    assert (timeouts.create, timeouts.update) == (f"{wait}s", f"{wait}s")
    # The claim keeps the size it was created with; a changed plan only changes the annotation.
    assert seen["big-weights"].ignore_changes == ["spec.resources.requests.storage"]
    pvc = only(evaluation, "PersistentVolumeClaim")
    assert (
        pvc["metadata"]["annotations"][contract.ANNOTATION_PLANNED_STORAGE]
        == pvc["spec"]["resources"]["requests"]["storage"]
    )


def test_model_store_args_from_a_plan():
    from types import SimpleNamespace

    store_config = config.ModelStoreConfig()
    bucket = aws_bucket()

    def plan(gated: bool):
        model = SimpleNamespace(gated=gated, signature=None)
        return SimpleNamespace(
            repo=REPO,
            revision=REV,
            served_name="llama",
            weights_bytes=LLAMA_8B_BYTES,
            lora=None,
            model_path=model_path(REPO, REV),
            load_from="volume",
            model=model,
        )

    made = {}

    def program():
        shared = ms.ServingNamespace("serving", ms.ServingNamespaceArgs(NAMESPACE, bucket))
        for gated in (True, False):
            made[gated] = ms.model_store_args(
                plan(gated),
                store_config,
                shared=shared,
                storage_class="efs-sc",
                bucket=bucket,
                hf_token=pulumi.Output.secret(TOKEN),
            )

    mock_runtime.run_in_mocks(program)
    assert made[True].hf_token is not None and made[False].hf_token is None
    assert made[True].downloader_image == store_config.downloaderImage
    assert made[True].volume_headroom == store_config.volumeHeadroom
    assert made[True].revision == REV and made[True].model_path.endswith(f"/{REPO}/{REV}")


def test_mirror_pool_placement_flows_from_model_store_args_to_the_job():
    """modelStore.mirrorPool: __main__ passes that pool's placement; the Job selects it and tolerates its taint."""
    from types import SimpleNamespace

    placement = GpuPlacement(
        pool="h100", gpu="H100-80GB", gpus_per_node=8, max_nodes=2, node_labels=pool_node_labels("h100", "H100-80GB")
    )
    plan = SimpleNamespace(
        repo=REPO,
        revision=REV,
        served_name="llama",
        weights_bytes=LLAMA_8B_BYTES,
        lora=None,
        model_path=model_path(REPO, REV),
        load_from="bucket",
        model=SimpleNamespace(gated=False, signature=None),
    )
    made = {}

    def program():
        shared = ms.ServingNamespace("serving", ms.ServingNamespaceArgs(NAMESPACE, aws_bucket()))
        made["args"] = ms.model_store_args(
            plan,
            config.ModelStoreConfig(),
            shared=shared,
            storage_class=None,
            bucket=aws_bucket(),
            hf_token=None,
            placement=placement,
            staging_storage_class="gp3",
        )
        ms.ModelStore("llama", made["args"])

    evaluation = mock_runtime.run_in_mocks(program)
    assert made["args"].placement is placement and made["args"].staging_storage_class == "gp3"
    pod = only(evaluation, "Job")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {contract.LABEL_POOL: "h100", contract.LABEL_ACCELERATOR: "h100-80gb"}
    assert pod["tolerations"] == [
        {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": contract.GPU_TAINT_EFFECT}
    ]
    # It runs on the GPU node without taking a GPU from the servers.
    for container in pod_containers(only(evaluation, "Job")):
        assert contract.GPU_RESOURCE not in container["resources"].get("limits", {})
    staging = next(v for v in pod["volumes"] if v["name"] == ms.WEIGHTS_VOLUME)
    assert staging["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "gp3"


def test_server_storage_matches_the_vllm_component():
    from components.serving.vllm import ServerStorage

    _, stores = evaluate(bucket=aws_bucket())
    volume_store = stores["llama-3-1-8b-instruct"]
    storage = ServerStorage(**volume_store.server_storage())
    # Volume path: mount the claim; the bucket copy exists but servers must not stream from it.
    assert storage.claim_name == "llama-3-1-8b-instruct-weights" and storage.weights_uri is None
    assert volume_store.bucket_uri is not None
    assert storage.depends_on == [volume_store.mirror_job]

    _, stores = evaluate(bucket=aws_bucket(), stores=[{"load_from": "bucket", "storage_class": None}])
    streaming = ServerStorage(**stores["llama-3-1-8b-instruct"].server_storage())
    assert streaming.claim_name is None and streaming.weights_uri is not None
