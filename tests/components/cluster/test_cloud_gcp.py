"""GKE cluster layer under mocks: GPU node pools, model bucket and Workload Identity."""

from __future__ import annotations

import json

import pytest

import stack_config as cfg
from common import contract, gpus
from components.cluster.common import MODEL_READER_SERVICE_ACCOUNT, MODEL_WRITER_SERVICE_ACCOUNT
from components.cluster.gcp import gke
from components.cluster.gcp.bucket import GKE_GSA_ANNOTATION
from components.cluster.select import create_cluster
from tests.support.cloud_mocks import one, run_cloud
from tests.support.gcp_cluster import POOLS, REVISION, stack
from tests.support.iam_eval import gcs_allows

BUCKET = "llm-serving-test-models"
WRITER = "serviceAccount:llm-serving-model-writer@mock-project.iam.gserviceaccount.com"
READER = "serviceAccount:llm-serving-model-reader@mock-project.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


@pytest.fixture(scope="module")
def existing():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test"))


def node_pool(evaluation, pool):
    return one(evaluation, "gcp:container/nodePool:NodePool", f"-{pool}-np").inputs


def bindings(evaluation):
    return [r.inputs for r in evaluation.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")]


# --- GPU node pools ----------------------------------------------------------------------------


def gpu_node_pools(evaluation):
    return [
        p
        for p in evaluation.of_type("gcp:container/nodePool:NodePool")
        if p.inputs["nodeConfig"].get("guestAccelerators")
    ]


def test_every_gpu_node_pool_carries_the_gpu_taint_with_the_exact_key_and_effect(created):
    pools = gpu_node_pools(created)
    assert sorted(p.name for p in pools) == ["llm-serving-a100-np", "llm-serving-h100-np", "llm-serving-l4-np"]
    for pool in pools:
        assert pool.inputs["nodeConfig"]["taints"] == [
            {"key": contract.GPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}
        ]


def test_node_labels_are_the_placement_labels_workloads_select_on(created):
    for name in ("l4", "h100", "a100"):
        assert node_pool(created, name)["nodeConfig"]["labels"] == created.result.placements[name].node_selector


def test_pool_with_min_zero_is_accepted_and_autoscales_on_totals(created):
    pool = node_pool(created, "l4")
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    assert pool["autoscaling"]["totalMaxNodeCount"] == 4
    assert "minNodeCount" not in pool["autoscaling"] and "maxNodeCount" not in pool["autoscaling"]
    assert pool["initialNodeCount"] == 0


def test_gpu_pools_live_in_one_zone_by_default_not_every_zone_of_the_region(created):
    for name in ("l4", "h100", "a100"):
        assert node_pool(created, name)["nodeLocations"] == ["us-central1-a"]
        # The pool's location is the cluster's region; node_locations picks the zones inside it.
        assert node_pool(created, name)["location"] == "us-central1"


def test_pool_zones_come_from_config_and_the_start_never_passes_max_nodes():
    pools = [
        {
            "name": "l4",
            "gpu": "L4",
            "minNodes": 1,
            "desiredNodes": 3,
            "maxNodes": 4,
            "zones": ["us-central1-b", "us-central1-c"],
        }
    ]
    pool = node_pool(run_cloud(lambda: create_cluster(stack(pools), "test")), "l4")
    assert pool["nodeLocations"] == ["us-central1-b", "us-central1-c"]
    assert pool["initialNodeCount"] == 2  # per zone: 4 in all, within maxNodes 4
    assert (pool["autoscaling"]["totalMinNodeCount"], pool["autoscaling"]["totalMaxNodeCount"]) == (1, 4)


def test_pool_of_one_node_over_three_zones_with_max_two_fails_instead_of_starting_three():
    pools = [
        {
            "name": "l4",
            "gpu": "L4",
            "minNodes": 1,
            "maxNodes": 2,
            "zones": ["us-central1-a", "us-central1-b", "us-central1-c"],
        }
    ]
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack(pools), "test"))
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: pools[0].zones: ")
    assert "1 node(s) over 3 zones start 3" in problem and "maxNodes (2)" in problem


def test_initial_count_per_zone_rounds_up_and_checks_the_total():
    zones = ["z-a", "z-b", "z-c"]
    assert [gke.initial_per_zone(n, zones) for n in (0, 1, 3, 4, 9)] == [0, 1, 1, 2, 3]
    assert gke.initial_per_zone(5, ["z-a"]) == 5
    raw = {
        "cloud": "gcp",
        "pools": [
            {
                "name": "l4",
                "gpu": "L4",
                "minNodes": 4,
                "maxNodes": 5,
                "zones": ["us-central1-a", "us-central1-b", "us-central1-c"],
            }
        ],
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
    }
    with pytest.raises(cfg.ConfigError) as info:
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")  # 2 per zone = 6 > 5
    assert info.value.problems == [
        (
            "Pulumi.test.yaml: pools[0].zones: GKE starts the same number of nodes in each zone, so 4 node(s) over "
            "3 zones start 6, more than maxNodes (5); raise maxNodes to 6 or list fewer zones"
        )
    ]
    raw["pools"][0]["zones"] = ["europe-west4-a"]
    with pytest.raises(cfg.ConfigError, match=r"pools\[0\].zones: 'europe-west4-a' is not in region us-central1"):
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")


def test_default_zone_is_the_regions_a_zone_or_the_zone_a_zonal_cluster_is_in():
    assert gke.default_zones("us-central1") == ["us-central1-a"]
    assert gke.default_zones("europe-west4") == ["europe-west4-a"]
    assert gke.default_zones("us-east1-c") == ["us-east1-c"]


def test_no_rdma_attachments_on_gke(created):
    assert created.result.rdma_attachments == {}


def test_accelerators_machine_and_managed_driver_come_from_catalog_and_config(created):
    l4 = node_pool(created, "l4")["nodeConfig"]
    assert l4["machineType"] == "g2-standard-4"
    assert l4["guestAccelerators"] == [
        {
            "type": "nvidia-l4",
            "count": 1,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"},
        }
    ]
    h100 = node_pool(created, "h100")["nodeConfig"]
    assert h100["machineType"] == "a3-highgpu-8g"
    assert h100["guestAccelerators"][0]["type"] == gpus.CATALOG["H100-80GB"].gcp_accelerator
    assert h100["guestAccelerators"][0]["count"] == 8
    assert h100["guestAccelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"] == "DEFAULT"


def test_driver_version_defaults_to_latest():
    evaluation = run_cloud(lambda: create_cluster(stack([{"name": "l4", "gpu": "L4"}]), "test"))
    (accelerator,) = node_pool(evaluation, "l4")["nodeConfig"]["guestAccelerators"]
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}


def test_spot_disk_image_streaming_gvnic_and_gke_metadata(created):
    h100 = node_pool(created, "h100")["nodeConfig"]
    assert h100["spot"] is True and node_pool(created, "l4")["nodeConfig"]["spot"] is False
    l4 = node_pool(created, "l4")["nodeConfig"]
    assert l4["diskSizeGb"] == 250
    for name in ("l4", "h100", "a100"):
        node_config = node_pool(created, name)["nodeConfig"]
        assert node_config["gcfsConfig"] == {"enabled": True}
        assert node_config["gvnic"] == {"enabled": True}
        assert node_config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node_config["serviceAccount"] == "llm-serving-gpu-nodes@mock-project.iam.gserviceaccount.com"


def test_image_streaming_api_is_enabled_and_left_enabled_on_destroy(created):
    api = one(created, "gcp:projects/service:Service", "containerfilesystem").inputs
    assert api["service"] == "containerfilesystem.googleapis.com"
    assert api["project"] == "mock-project"
    assert api["disableOnDestroy"] is False


def test_local_ssd_backs_ephemeral_storage_where_the_machine_has_it_unless_turned_off(created):
    h100 = node_pool(created, "h100")["nodeConfig"]
    assert h100["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 6000 // 375}
    assert "ephemeralStorageLocalSsdConfig" not in node_pool(created, "a100")["nodeConfig"]


def test_boot_disk_type_follows_the_machine_series():
    assert gke.boot_disk_type("a4-highgpu-8g") == "hyperdisk-balanced"
    assert gke.boot_disk_type("a3-ultragpu-8g") == "hyperdisk-balanced"
    assert gke.boot_disk_type("g2-standard-8") == "pd-balanced"


def test_node_service_account_gets_only_the_default_node_role(created):
    grants = [r.inputs for r in created.of_type("gcp:projects/iAMMember:IAMMember")]
    assert [(g["role"], g["member"]) for g in grants] == [
        (
            "roles/container.defaultNodeServiceAccount",
            "serviceAccount:llm-serving-gpu-nodes@mock-project.iam.gserviceaccount.com",
        ),
    ]


def test_created_cluster_has_workload_identity_release_channel_and_no_default_pool(created):
    cluster = one(created, "gcp:container/cluster:Cluster").inputs
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "mock-project.svc.id.goog"}
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["minMasterVersion"] == "1.33"
    assert cluster["addonsConfig"]["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    # The model volume's Filestore instances go on the stack's own network (components/cluster/gcp/filestore.py).
    assert created.result.rwx_storage_class == "llm-serving-filestore"


# --- system node pool ----------------------------------------------------------------------------


def test_created_cluster_has_an_untainted_cpu_system_pool_for_everything_but_gpu_servers(created):
    pool = node_pool(created, "system")
    node_config = pool["nodeConfig"]
    assert not node_config.get("taints")
    assert not node_config.get("guestAccelerators")
    assert node_config["labels"] == {contract.LABEL_POOL: "system"}
    assert node_config["machineType"] == gke.DEFAULT_SYSTEM_MACHINE_TYPE == "e2-standard-8"
    assert node_config["imageType"] == "COS_CONTAINERD"
    assert (node_config["diskSizeGb"], node_config["diskType"]) == (200, "pd-balanced")
    assert (pool["autoscaling"]["totalMinNodeCount"], pool["autoscaling"]["totalMaxNodeCount"]) == (2, 4)
    assert pool["autoscaling"]["locationPolicy"] == "BALANCED"
    # One zone by default, so the per-zone initial count is the whole minNodes.
    assert pool["nodeLocations"] == ["us-central1-a"]
    assert pool["initialNodeCount"] == 2
    # The same node identity and metadata protection as the GPU pools.
    gpu = node_pool(created, "l4")["nodeConfig"]
    for key in ("serviceAccount", "oauthScopes", "workloadMetadataConfig", "gvnic"):
        assert node_config[key] == gpu[key], key
    assert node_config["serviceAccount"] == "llm-serving-gpu-nodes@mock-project.iam.gserviceaccount.com"
    assert "system" not in created.result.placements


def test_system_pool_sizes_and_machine_type_come_from_config():
    evaluation = run_cloud(
        lambda: create_cluster(
            stack(
                POOLS[:1],
                cluster={"systemPool": {"machineType": "n2-standard-4", "minNodes": 3, "maxNodes": 9, "diskGib": 100}},
            ),
            "test",
        )
    )
    pool = node_pool(evaluation, "system")
    assert pool["nodeConfig"]["machineType"] == "n2-standard-4"
    assert pool["nodeConfig"]["diskSizeGb"] == 100
    assert (pool["autoscaling"]["totalMinNodeCount"], pool["autoscaling"]["totalMaxNodeCount"]) == (3, 9)
    (gpu,) = gpu_node_pools(evaluation)
    assert gpu.inputs["nodeConfig"]["taints"][0]["key"] == contract.GPU_TAINT_KEY


def test_system_pool_zones_come_from_config_and_the_initial_count_is_spread_over_them():
    evaluation = run_cloud(
        lambda: create_cluster(
            stack(
                POOLS[:1],
                cluster={"systemPool": {"minNodes": 3, "maxNodes": 6, "zones": ["us-central1-b", "us-central1-c"]}},
            ),
            "test",
        )
    )
    pool = node_pool(evaluation, "system")
    assert pool["nodeLocations"] == ["us-central1-b", "us-central1-c"]
    # ceil(3 / 2) per zone: the pool starts with 4 nodes, never fewer than minNodes.
    assert pool["initialNodeCount"] == 2


def test_system_pool_whose_spread_start_would_pass_max_nodes_fails_naming_the_key():
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(
            lambda: create_cluster(
                stack(
                    POOLS[:1],
                    cluster={
                        "systemPool": {
                            "minNodes": 2,
                            "maxNodes": 2,
                            "zones": ["us-central1-a", "us-central1-b", "us-central1-c"],
                        }
                    },
                ),
                "test",
            )
        )
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: cluster.systemPool.zones: ")
    assert "start 3" in problem and "maxNodes (2)" in problem


def test_existing_cluster_gets_no_system_pool(existing):
    # An existing cluster is assumed to have its own CPU nodes: only the GPU pool is added.
    assert [p.name for p in existing.of_type("gcp:container/nodePool:NodePool")] == ["shared-gpu-l4-np"]


# --- model bucket ------------------------------------------------------------------------------


def test_bucket_is_uniform_never_public_and_versioned(created):
    bucket = one(created, "gcp:storage/bucket:Bucket").inputs
    assert bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"
    assert bucket["versioning"] == {"enabled": True}
    assert not bucket.get("forceDestroy")
    # Google encrypts every object at rest; no `encryption` block means Google-managed keys.
    assert "encryption" not in bucket or bucket["encryption"].get("defaultKmsKeyName")


def test_every_bucket_grant_is_conditional_and_none_is_public(created):
    for grant in bindings(created):
        assert grant["bucket"] == BUCKET
        assert grant["member"] not in ("allUsers", "allAuthenticatedUsers")
        assert grant["condition"]["expression"]


@pytest.mark.parametrize("permission", ["storage.objects.create", "storage.multipartUploads.create"])
def test_writer_may_write_only_under_the_models_prefix(created, permission):
    grants = bindings(created)
    assert gcs_allows(
        grants, WRITER, permission, BUCKET, obj=f"models/Qwen/Qwen2.5-7B-Instruct/{REVISION}/model.safetensors"
    )
    assert not gcs_allows(grants, WRITER, permission, BUCKET, obj="other/file")
    assert not gcs_allows(grants, WRITER, permission, BUCKET, obj="models-evil/file")
    assert not gcs_allows(grants, WRITER, permission, BUCKET, obj="top-level-file")


def test_writer_cannot_delete_or_overwrite(created):
    grants = bindings(created)
    for permission in ("storage.objects.delete", "storage.objects.update", "storage.objects.setIamPolicy"):
        assert not gcs_allows(grants, WRITER, permission, BUCKET, obj="models/x")


def test_reader_may_only_read_under_the_models_prefix(created):
    grants = bindings(created)
    assert gcs_allows(grants, READER, "storage.objects.get", BUCKET, obj="models/Qwen/x/config.json")
    assert not gcs_allows(grants, READER, "storage.objects.get", BUCKET, obj="other/x")
    for permission in (
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.update",
        "storage.multipartUploads.create",
    ):
        assert not gcs_allows(grants, READER, permission, BUCKET, obj="models/x"), permission


@pytest.mark.parametrize("member", [WRITER, READER])
def test_listing_is_confined_to_the_models_prefix(created, member):
    grants = bindings(created)
    assert gcs_allows(grants, member, "storage.objects.list", BUCKET, list_prefix="models/Qwen/")
    assert not gcs_allows(grants, member, "storage.objects.list", BUCKET, list_prefix="")
    assert not gcs_allows(grants, member, "storage.objects.list", BUCKET, list_prefix="other/")


@pytest.mark.parametrize(
    "who,service_account", [("writer", MODEL_WRITER_SERVICE_ACCOUNT), ("reader", MODEL_READER_SERVICE_ACCOUNT)]
)
def test_each_gsa_is_usable_only_by_its_kubernetes_service_account(created, who, service_account):
    grant = one(created, "gcp:serviceaccount/iAMMember:IAMMember", f"{who}-workload-identity").inputs
    assert grant["role"] == "roles/iam.workloadIdentityUser"
    assert grant["member"] == f"serviceAccount:mock-project.svc.id.goog[llm-serving/{service_account}]"
    assert grant["serviceAccountId"].endswith(f"llm-serving-{service_account}@mock-project.iam.gserviceaccount.com")


def test_bindings_carry_the_gke_annotation_naming_each_gsa(created):
    bucket = created.result.bucket
    assert bucket.scheme == "gs" and bucket.prefix == "models"
    assert (bucket.writer.namespace, bucket.writer.name) == ("llm-serving", MODEL_WRITER_SERVICE_ACCOUNT)
    assert (bucket.reader.namespace, bucket.reader.name) == ("llm-serving", MODEL_READER_SERVICE_ACCOUNT)
    assert set(bucket.writer.annotations) == {GKE_GSA_ANNOTATION} == set(bucket.reader.annotations)


# --- Kubernetes provider -----------------------------------------------------------------------


def kubeconfig(evaluation):
    return json.loads(one(evaluation, "pulumi:providers:kubernetes").inputs["kubeconfig"])


def test_provider_kubeconfig_comes_from_the_cluster_and_uses_the_gke_auth_plugin(created):
    config = kubeconfig(created)
    # The DNS-based endpoint (on by default): its certificate is checked against the system's roots,
    # so no cluster CA (gcloud writes none for it either).
    assert config["clusters"][0]["cluster"] == {"server": "https://gke-mock0123456789.mock-region.gke.goog"}
    (user,) = config["users"]
    assert set(user["user"]) == {"exec"}
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_a_created_cluster_takes_user_traffic_on_its_dns_endpoint(created):
    cluster = one(created, "gcp:container/cluster:Cluster").inputs
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}


def test_with_the_dns_endpoint_off_the_provider_uses_the_ip_endpoint_and_the_cluster_ca():
    raw = {
        "cloud": "gcp",
        "cluster": {"gcpProject": "mock-project"},
        "pools": POOLS[:1],
        "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": "l4"}],
        "security": {"clusterEndpoint": {"dnsEndpoint": False}},
    }
    evaluation = run_cloud(lambda: create_cluster(cfg.parse_stack_config(raw, "Pulumi.test.yaml"), "test"))
    cluster = one(evaluation, "gcp:container/cluster:Cluster").inputs
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False}}
    assert kubeconfig(evaluation)["clusters"][0]["cluster"] == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": "bW9jay1jYQ==",
    }


def test_existing_cluster_is_looked_up_and_not_created(existing):
    assert not existing.of_type("gcp:container/cluster:Cluster")
    (lookup,) = [args for token, args in existing.calls_made if token == "gcp:container/getCluster:getCluster"]
    assert (lookup["name"], lookup["location"], lookup["project"]) == ("shared-gpu", "us-central1", "mock-project")
    assert node_pool(existing, "l4")["cluster"] == "shared-gpu"
    assert kubeconfig(existing)["clusters"][0]["cluster"]["server"] == "https://203.0.113.20"


def test_project_falls_back_to_the_provider_configuration():
    raw = {"cloud": "gcp", "pools": POOLS[:1], "models": [{"repo": "a/b", "revision": REVISION, "pool": "l4"}]}
    evaluation = run_cloud(lambda: create_cluster(cfg.parse_stack_config(raw, "Pulumi.test.yaml"), "test"))
    assert any(token == "gcp:organizations/getClientConfig:getClientConfig" for token, _ in evaluation.calls_made)
    assert one(evaluation, "gcp:container/cluster:Cluster").inputs["project"] == "mock-project"


# --- config errors -----------------------------------------------------------------------------


def problems(pools):
    with pytest.raises(cfg.ConfigError) as err:
        stack(pools)
    return err.value.problems


def test_gpu_the_cloud_does_not_offer_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "A10G"}])
    assert "pools[0].gpu" in problem and "A10G is not offered on gcp" in problem


def test_machine_type_without_gpus_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "L4", "machineType": "n2-standard-8"}])
    assert "pools[0].machineType" in problem and "not a GPU machine type on gcp" in problem


def test_more_gpus_per_node_than_the_machine_has_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "A100-40GB", "machineType": "a2-highgpu-1g", "gpusPerNode": 2}])
    assert "pools[0].gpusPerNode" in problem and "a2-highgpu-1g has 1 GPU" in problem


def test_efa_on_gcp_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "H100-80GB", "gpusPerNode": 8, "efa": True}])
    assert "pools[0].efa" in problem and "AWS feature" in problem


def test_operator_installed_driver_gets_ubuntu_nodes_without_gke_device_plugin():
    import stack_config as cfg
    from components.cluster.select import create_cluster

    raw = {
        "cloud": "gcp",
        "cluster": {"gcpProject": "mock-project"},
        "pools": [{"name": "l4", "gpu": "L4", "gkeDriverVersion": "INSTALLATION_DISABLED"}],
        "operators": {"gpuOperator": {"driver": "operator"}},
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
    }
    stack = cfg.parse_stack_config(raw, "Pulumi.test.yaml")
    evaluation = run_cloud(lambda: create_cluster(stack, "test"))
    [pool] = gpu_node_pools(evaluation)
    node_config = pool.inputs["nodeConfig"]
    assert node_config["imageType"] == "UBUNTU_CONTAINERD"
    # Image streaming requires Container-Optimized OS with containerd (GKE image streaming docs).
    assert node_config["gcfsConfig"] == {"enabled": False}
    assert node_config["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert (
        node_config["guestAccelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"]
        == "INSTALLATION_DISABLED"
    )
