"""Stage 3 of the serving path: the pinned weights, mirrored once, verified, mounted everywhere.

Two components:

- `ServingNamespace` (`llm-serving:k8s:ServingNamespace`): the one namespace the mirror Jobs and
  the servers share, with the two ServiceAccounts the cloud's identities are bound to (writer for
  the mirror, reader for the servers). Created once; every ModelStore receives its outputs.
- `ModelStore` (`llm-serving:k8s:ModelStore`), one per model: the HF token Secret (gated models
  only), the ReadWriteMany volume, and the mirror Job that downloads the pinned commit, verifies
  every file against the Hub's published digests (components/model_store/mirror/mirror.py, shipped in a
  ConfigMap), writes manifest.json beside the weights and syncs the folder to the model bucket.

Servers take what they need from the ModelStore's attributes (`volume_spec()`, `volume_mount()`,
`model_path`, `weights_uri`, `reader_service_account`) and wait for the mirror with
`depends_on=[store.mirror_job]`: the Kubernetes provider does not report a Job as created until it
has completed, so a server is never rolled out in front of a half-written volume.

Weight paths (`modelStore.loadFrom`):
- volume: a new RWX PVC; the Job fills <mount>/<org>/<name>/<revision>; servers mount it read-only.
- existing-claim: the named PVC is mounted in place of a new one. The Job still runs against it:
  `hf download` skips files already present, so on a pre-filled claim it only re-verifies them and
  writes the manifest, and on an empty one it fills it. Either way the servers depend on a Job that
  proved the bytes, and a claim holding different bytes fails loudly instead of serving them.
- bucket: no model PVC. The Job stages the download on a generic ephemeral volume (a RWO claim of
  the cluster's default class, or `staging_storage_class`, created with the pod and deleted with
  it) sized like the model volume, and syncs it to the bucket; servers read `weights_uri` with
  vLLM's `--load-format runai_streamer`. Staging on the node's disk instead would ask for ~180 GiB
  of ephemeral storage for a 70B model, more than a 200 GiB system node can offer.

Only the files `contract.MODEL_FILE_INCLUDE` / `MODEL_FILE_EXCLUDE` select are mirrored (the
weights, configs and tokenizer), never a second checkpoint format. Not every model has a store:
a model KServe pulls from the Hub itself (`kserveStorage: hf`) gets none, and nothing here
assumes otherwise. docs/model-store.md describes sizes, deadlines and recovery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s

from common import contract, images, pod_security
from common.facts import Fact
from components.cluster.interface import GpuPlacement, ModelBucket
from components.model_store import signature as model_signature
from components.model_store.mirror import SCRIPT as MIRROR_SCRIPT
from components.model_store.mirror import SCRIPT_NAME as MIRROR_SCRIPT_NAME
from planner.plan import ModelPlan
from stack_config import ModelStoreConfig
from stack_config.models import SignatureConfig

LoadFrom = Literal["volume", "bucket", "existing-claim"]
GIB = 1024**3

# Official cloud CLI images for the sync step. The downloader image (vLLM's) carries `hf` but no
# aws CLI or gcloud, and installing one at run time is exactly what a pinned image is for avoiding.
# Tags as published on Docker Hub (amazon/aws-cli, google/cloud-sdk), with their digests, in
# common/images.py; bump them there together with a test run.
AWS_CLI_IMAGE = images.reference("aws-cli")
GCLOUD_IMAGE = images.reference("gcloud")
SYNC_IMAGES = {"s3": AWS_CLI_IMAGE, "gs": GCLOUD_IMAGE}
# The sync container runs them as uid 65532 on a read-only root (HOME and CLOUDSDK_CONFIG on the
# scratch emptyDir, /tmp on its own). Not run here: no container runtime on this machine.
SYNC_NON_ROOT = Fact(
    subject=f"{AWS_CLI_IMAGE} and {GCLOUD_IMAGE} run as uid 65532 on a read-only root filesystem",
    value=None,
    source="not measured (no container runtime here); docs/security.md",
    established=False,
    resolve_with=(
        f"docker run --rm --user 65532:65532 --read-only --tmpfs /tmp -e HOME=/tmp {AWS_CLI_IMAGE} "
        f"--version && docker run --rm --user 65532:65532 --read-only --tmpfs /tmp -e HOME=/tmp "
        f"-e CLOUDSDK_CONFIG=/tmp/gcloud {GCLOUD_IMAGE} gcloud --version"
    ),
)

# Without a bucket binding (an existing cluster) the service accounts still exist, with these names.
# The component label of everything the mirror runs or reads (Jobs, script, token, trust key);
# the serving namespace's NetworkPolicies select the Jobs' pods by it.
COMPONENT_MIRROR = "model-mirror"
DEFAULT_WRITER_SERVICE_ACCOUNT = "model-mirror"
DEFAULT_READER_SERVICE_ACCOUNT = "model-reader"

# Volume: weights x headroom, rounded up to whole GiB, never below this floor (tokenizer, configs,
# manifest and the download bookkeeping of a small model still need room). EFS ignores the size;
# Filestore rounds it up to its tier's minimum, so the floor only matters for CSI drivers that
# honour small sizes.
MIN_VOLUME_GIB = 10

# Mirror Job timing. The deadline has to cover a slow day, not a typical one: it kills the Job, and
# a killed mirror blocks every server of the model. Figures are deliberately pessimistic:
# - the Hub (Xet/CDN) usually delivers well over 100 MB/s to a cloud VM, but rate limits and busy
#   regions drop it; 50 MB/s is the speed we plan for;
# - re-hashing reads every byte back from the network volume (~200 MB/s for one reader);
# - the bucket sync uploads every byte once more (~100 MB/s for one `aws s3 sync`/`gcloud storage rsync`);
# - activeDeadlineSeconds counts across retries, so it allows two full attempts;
# - plus a fixed allowance for scheduling a node and pulling the ~10 GB downloader image.
HUB_DOWNLOAD_BYTES_PER_SECOND = 50e6
VERIFY_READ_BYTES_PER_SECOND = 200e6
BUCKET_UPLOAD_BYTES_PER_SECOND = 100e6
ATTEMPTS_WITHIN_DEADLINE = 2
FIXED_OVERHEAD_SECONDS = 900
MIN_DEADLINE_SECONDS = 1800
# Pod failures retried before the Job is Failed (a network blip mid-download); more retries only
# hide a real problem such as a revoked token or a mismatching file.
MIRROR_BACKOFF_LIMIT = 3

# Pulumi waits this much longer than the Job's own deadline: were the two equal, Pulumi's timeout
# could fire first and report "timed out" instead of the Job's DeadlineExceeded / BackoffLimitExceeded.
PULUMI_WAIT_MARGIN_SECONDS = 600

# Scratch space for HF_HOME (hf_xet's chunk cache, logs) on the node's disk, whichever path is used.
# It is all the node disk the mirror asks for: the weights go to a volume in every mode.
SCRATCH_GIB = 16
# Above this, hashing and Xet's parallel chunk fetches are CPU-bound with 2 cores.
LARGE_MODEL_BYTES = 64 * GIB

SCRIPT_MOUNT_PATH = "/opt/llm-serving-mirror"
SCRATCH_MOUNT_PATH = "/scratch"
WEIGHTS_VOLUME = "model-weights"
# Read-only root filesystems: HOME (hf's and the cloud CLIs' config and caches) lives on the scratch
# emptyDir, temp files (`mktemp` in the sync script, hf's partial downloads) on their own emptyDir.
HOME_PATH = f"{SCRATCH_MOUNT_PATH}/home"
TMP_VOLUME = "tmp"
TMP_SIZE_LIMIT = "1Gi"
# gcloud keeps its configuration and logs here (default ~/.config/gcloud; `gcloud topic configurations`).
GCLOUD_CONFIG_PATH = f"{SCRATCH_MOUNT_PATH}/gcloud"
# The sync container's own HOME: a folder the fetch container (root on a shared volume) never
# creates, so the non-root sync container can always write into it.
SYNC_HOME_PATH = f"{SCRATCH_MOUNT_PATH}/sync-home"

# Why the fetch container keeps uid 0 when it writes to a ReadWriteMany volume (it still drops every
# capability, cannot escalate and runs under the runtime's seccomp profile). The volume's root
# directory belongs to root on Filestore and on most NFS servers behind an existing claim, and
# whether the CSI driver hands it to the pod's fsGroup is the driver's choice (CSIDriver
# fsGroupPolicy; NFS-backed drivers usually say None or File-with-RWO-only). A non-root mirror would
# then fail with "permission denied" on its first write. On EFS the access point imposes its own
# POSIX owner whatever the uid, and a bucket-backed store stages on a ReadWriteOnce volume whose
# group kubelet does set to the fsGroup, so both run non-root.
ROOT_ON_SHARED_VOLUME_REASON = (
    "writes the weights to a ReadWriteMany volume whose root directory is owned by root and whose CSI "
    "driver may not apply the pod's fsGroup, so a non-root uid could not create files there"
)
# What that means for the serving namespace: root is allowed by the baseline level, not by restricted.
MIRROR_POD_SECURITY_EXCEPTION = (
    f"baseline: the mirror Job's fetch container runs as uid 0 because it {ROOT_ON_SHARED_VOLUME_REASON}."
)


def mirror_runs_as_root(load_from: LoadFrom) -> bool:
    """Whether a model's mirror Job keeps uid 0 (ROOT_ON_SHARED_VOLUME_REASON)."""
    return load_from != "bucket"


# --- pure sizing, shared with the tests and the offline plan --------------------------------


def volume_size_gib(weights_bytes: int, headroom: float) -> int:
    return max(MIN_VOLUME_GIB, math.ceil(weights_bytes * headroom / GIB))


def mirror_seconds_per_attempt(weights_bytes: int, syncs_to_bucket: bool, signed: bool = False) -> float:
    seconds = weights_bytes / HUB_DOWNLOAD_BYTES_PER_SECOND + weights_bytes / VERIFY_READ_BYTES_PER_SECOND
    if signed:
        # model-signing hashes every file again to compare with the signed digests.
        seconds += weights_bytes / VERIFY_READ_BYTES_PER_SECOND
    if syncs_to_bucket:
        seconds += weights_bytes / BUCKET_UPLOAD_BYTES_PER_SECOND
    return seconds


def mirror_deadline_seconds(weights_bytes: int, syncs_to_bucket: bool, signed: bool = False) -> int:
    budget = ATTEMPTS_WITHIN_DEADLINE * mirror_seconds_per_attempt(weights_bytes, syncs_to_bucket, signed)
    return max(MIN_DEADLINE_SECONDS, int(math.ceil((budget + FIXED_OVERHEAD_SECONDS) / 60) * 60))


def mirror_resources(weights_bytes: int, ephemeral_gib: int = SCRATCH_GIB) -> dict[str, dict[str, str]]:
    cpu = "4" if weights_bytes > LARGE_MODEL_BYTES else "2"
    return {
        "requests": {"cpu": cpu, "memory": "4Gi", "ephemeral-storage": f"{ephemeral_gib}Gi"},
        "limits": {"memory": "8Gi", "ephemeral-storage": f"{ephemeral_gib}Gi"},
    }


def file_selection_args() -> list[str]:
    """`--include/--exclude` for mirror.py fetch: the one file selection, from the contract."""
    args: list[str] = []
    for pattern in contract.MODEL_FILE_INCLUDE:
        args += ["--include", pattern]
    for pattern in contract.MODEL_FILE_EXCLUDE:
        args += ["--exclude", pattern]
    return args


def _name_of(metadata) -> str:
    # Typed resources hand metadata back as an ObjectMeta output; mocks and raw dicts as a dict.
    return metadata["name"] if isinstance(metadata, dict) else metadata.name


def k8s_name(base: str, suffix: str) -> str:
    """`<base>-<suffix>` cut to a 63-character DNS label, keeping the suffix whole."""
    room = 63 - len(suffix) - 1
    return f"{base[:room].rstrip('-')}-{suffix}"


# The sync command per bucket scheme: fetch one object to a local file, upload the weights (not
# the manifest, not hf's bookkeeping), and upload the manifest create-only.
#
# Re-runs (a replaced Job, a retry after a failed attempt) must pass with the writer's permissions
# as they are, without delete: on GCS, replacing an object needs storage.objects.delete besides
# create ("To replace an existing object, both storage.objects.create and storage.objects.delete are
# required", https://cloud.google.com/storage/docs/access-control/iam-permissions), which the writer
# (objectCreator + objectViewer) lacks by design, so any overwrite is a 403. Hence:
# - the manifest goes last and create-only: on GCS with --if-generation-match=0 (a precondition
#   that holds only when no live object has the name; https://cloud.google.com/storage/docs/
#   request-preconditions), on S3 with If-None-Match: * (PutObject answers 412 when the key exists;
#   botocore's s3 model, PutObjectRequest.IfNoneMatch). A manifest in the bucket therefore always
#   means a complete, verified copy written once;
# - when the bucket already holds a manifest, the copy is complete: an identical manifest (the
#   same files with the same SHA-256) means there is nothing to upload, a different one means the
#   bucket holds other bytes for this commit, and the Job fails saying so instead of overwriting;
# - without a manifest (an earlier attempt stopped mid-way) the weights are synced again, skipping
#   objects already there with the same content: GCS rsync compares hashes with --checksums-only
#   ("skip modification time check and compare object hashes", `gcloud storage rsync --help`), so
#   a re-downloaded file with a new mtime is not re-uploaded (which would be an overwrite, a 403);
#   `aws s3 sync` re-uploads a file newer than its object, which S3 allows without a delete
#   permission (the bucket's versioning keeps the earlier version).
_SYNC_COMMANDS = {
    "s3": {
        "fetch": 'aws s3 cp "$1" "$2" --no-progress --only-show-errors',
        "weights": (
            'aws s3 sync "$SRC" "$DST" --no-progress --only-show-errors --exclude ".cache/*" --exclude "manifest.json"'
        ),
        # put-object takes bucket and key apart: s3://<bucket>/<key...>.
        "weights_failed": "uploading the weights to $DST failed",
        "prepare": 'KEY="${DST#s3://}"; BUCKET="${KEY%%/*}"; KEY="${KEY#*/}/manifest.json"',
        "manifest": (
            'aws s3api put-object --bucket "$BUCKET" --key "$KEY" --body "$SRC/manifest.json" '
            "--if-none-match '*' >/dev/null"
        ),
    },
    "gs": {
        "fetch": 'gcloud storage cp "$1" "$2" --no-user-output-enabled',
        "weights": (
            'gcloud storage rsync "$SRC" "$DST" --recursive --checksums-only --exclude=\'^\\.cache/|^manifest\\.json$\''
        ),
        "weights_failed": (
            "uploading the weights to $DST failed; an object there that differs from the verified "
            "file cannot be replaced by the writer (no delete permission, by design)"
        ),
        "prepare": "",
        "manifest": 'gcloud storage cp --if-generation-match=0 "$SRC/manifest.json" "$DST/manifest.json"',
    },
}


def sync_script(scheme: str, local_dir: str, destination: pulumi.Input[str]) -> pulumi.Output[str]:
    """Shell for the sync container: weights first, manifest.json last, re-runnable (see above).

    A manifest in the bucket therefore means a complete, verified copy; a reader that finds the
    prefix without one is looking at an interrupted sync. `hf download`'s bookkeeping folder
    (.cache/) stays behind.
    """
    if scheme not in _SYNC_COMMANDS:
        raise ValueError(f"bucket scheme {scheme!r} is not s3 or gs")
    cmd = _SYNC_COMMANDS[scheme]
    body = (
        f"fetch() {{ {cmd['fetch']}; }}\n"
        'same() { [ "$(sha256sum < "$1")" = "$(sha256sum < "$2")" ]; }\n'
        'REMOTE="$(mktemp)"\n'
        "# A complete copy is already there: identical, or different bytes for the same commit.\n"
        'if fetch "$DST/manifest.json" "$REMOTE" 2>/dev/null; then\n'
        '  if same "$SRC/manifest.json" "$REMOTE"; then\n'
        '    echo "$DST already holds this verified copy (identical manifest.json); nothing to upload"; exit 0\n'
        "  fi\n"
        '  echo "$DST/manifest.json differs from the verified download in $SRC: the bucket holds other bytes for '
        "this commit. The writer cannot replace objects (no delete permission, by design); compare the two "
        'manifests, then remove the prefix with an identity that may delete and re-run the Job" >&2; exit 1\n'
        "fi\n"
        f'{cmd["weights"]} || {{ echo "{cmd["weights_failed"]}" >&2; exit 1; }}\n'
        "# Create-only: if another run wrote the manifest meanwhile, it must be the same one.\n"
        + (f"{cmd['prepare']}\n" if cmd["prepare"] else "")
        + f"if ! {cmd['manifest']}; then\n"
        '  if fetch "$DST/manifest.json" "$REMOTE" && same "$SRC/manifest.json" "$REMOTE"; then\n'
        '    echo "another run completed $DST with the same manifest"; exit 0\n'
        "  fi\n"
        '  echo "could not write $DST/manifest.json, and the bucket holds no identical one" >&2; exit 1\n'
        "fi\n"
        'echo "synced the verified copy to $DST"\n'
    )
    return pulumi.Output.concat(
        "set -eu\n",
        "SRC=",
        local_dir,
        "\n",
        "DST=",
        destination,
        "\n",
        'test -f "$SRC/manifest.json" || { echo "no verified manifest in $SRC; refusing to sync" >&2; exit 1; }\n',
        body,
    )


# --- the shared namespace ---------------------------------------------------------------------


@dataclass
class ServingNamespaceArgs:
    namespace: str
    # The model bucket, when the cluster has one: its bindings name the service accounts and carry
    # the annotations (GKE Workload Identity email; EKS Pod Identity needs none) that make them cloud identities.
    bucket: ModelBucket | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Further annotations of the Namespace (what enforces its NetworkPolicies: network_policy/enforcement.py).
    annotations: dict[str, str] = field(default_factory=dict)
    pod_security_exceptions: dict[str, str] = field(default_factory=dict)
    """What the stack runs here that cannot meet the restricted Pod Security level: who -> "<level it
    meets>: <reason>". Empty: the namespace enforces restricted. Decided from what the stack deploys."""
    # The Pod Security policy version the namespace pins: its cluster's minor version.
    psa_version: str = pod_security.PSA_VERSION


class ServingNamespace(pulumi.ComponentResource):
    """The namespace every mirror Job and server of the stack runs in, and its service accounts."""

    namespace: pulumi.Output[str]
    writer_service_account: pulumi.Output[str]
    reader_service_account: pulumi.Output[str]

    def __init__(self, name: str, args: ServingNamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:ServingNamespace", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {contract.LABEL_COMPONENT: "model-serving", **args.labels}
        bucket = args.bucket
        if bucket is not None:
            for role, binding in (("writer", bucket.writer), ("reader", bucket.reader)):
                if binding.namespace != args.namespace:
                    raise ValueError(
                        f"the bucket's {role} identity is bound to namespace {binding.namespace!r} but the model "
                        f"store uses {args.namespace!r}; bind the identity to modelStore.namespace"
                    )
        # Pod Security Admission: the strictest level every pod of the stack meets, enforced; warn and
        # audit at restricted, so anything short of it is reported even where it is admitted.
        self.pod_security_level, reasons = pod_security.strictest_level(args.pod_security_exceptions)
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": args.namespace,
                "labels": {**labels, **pod_security.namespace_labels(self.pod_security_level, args.psa_version)},
                "annotations": {
                    **args.annotations,
                    **pod_security.namespace_annotations(self.pod_security_level, reasons),
                },
            },
            opts=child,
        )
        self.namespace = self.namespace_resource.metadata.apply(_name_of)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace_resource])

        def account(role: str, binding, default_name: str) -> k8s.core.v1.ServiceAccount:
            return k8s.core.v1.ServiceAccount(
                f"{name}-{role}",
                metadata={
                    "name": binding.name if binding else default_name,
                    "namespace": self.namespace,
                    "labels": {**labels, contract.LABEL_COMPONENT: f"model-{role}"},
                    "annotations": dict(binding.annotations) if binding else {},
                },
                # The mirror and the servers never call the Kubernetes API; a mounted API token
                # would only widen what a compromised pod can do.
                automount_service_account_token=False,
                opts=in_ns,
            )

        self.writer = account("writer", bucket.writer if bucket else None, DEFAULT_WRITER_SERVICE_ACCOUNT)
        self.reader = account("reader", bucket.reader if bucket else None, DEFAULT_READER_SERVICE_ACCOUNT)
        self.writer_service_account = self.writer.metadata.apply(_name_of)
        self.reader_service_account = self.reader.metadata.apply(_name_of)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "writerServiceAccount": self.writer_service_account,
                "readerServiceAccount": self.reader_service_account,
            }
        )


# --- one model's store ------------------------------------------------------------------------


@dataclass
class ModelStoreArgs:
    repo: str
    revision: str  # a 40-hex commit, validated by config.py
    served_name: str  # DNS label, the model's Kubernetes name
    weights_bytes: int
    model_path: str  # <mount>/<org>/<name>/<revision>, from planner.plan.model_path
    namespace: pulumi.Input[str]
    writer_service_account: pulumi.Input[str]
    reader_service_account: pulumi.Input[str]
    downloader_image: str
    # images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors).
    image_mirrors: dict[str, str] = field(default_factory=dict)
    load_from: LoadFrom = "volume"
    storage_class: str | None = None  # RWX class (load_from volume)
    existing_claim: str | None = None  # load_from existing-claim
    bucket: ModelBucket | None = None
    volume_headroom: float = 1.25
    gated: bool = False
    hf_token: pulumi.Input[str] | None = None  # a secret Output; required when gated
    # Run the mirror on a GPU pool (tolerating its taint). None: CPU nodes, which are cheaper and
    # do not hold a GPU idle for an hour of downloading.
    placement: GpuPlacement | None = None
    # StorageClass of the RWO staging volume (load_from bucket). None: the cluster's default class.
    staging_storage_class: str | None = None
    # LoRA adapters served on this model: each mirrored by a Job of its own onto the same volume.
    adapters: list[MirrorSource] = field(default_factory=list)
    # The publisher's signature to verify after the download; None: unsigned.
    signature: SignatureConfig | None = None

    @property
    def volume_bytes(self) -> int:
        """What the volume holds: the base weights and every adapter (an upper bound of their size)."""
        return self.weights_bytes + sum(a.size_bytes for a in self.adapters)


@dataclass(frozen=True)
class MirrorSource:
    """One pinned Hub revision a mirror Job downloads and verifies: the base weights or an adapter."""

    repo: str
    revision: str
    local_dir: str  # <mount>/<org>/<name>/<revision>
    size_bytes: int  # what the deadline and the download are planned for
    adapter: str | None = None  # the adapter's served name; None for the base weights


def model_store_args(
    plan: ModelPlan,
    store_config: ModelStoreConfig,
    *,
    shared: ServingNamespace,
    storage_class: str | None,
    bucket: ModelBucket | None,
    hf_token: pulumi.Input[str] | None,
    placement: GpuPlacement | None = None,
    staging_storage_class: str | None = None,
    image_mirrors: dict[str, str] | None = None,
) -> ModelStoreArgs:
    """Wiring helper for __main__: a ModelPlan and the validated modelStore config to typed args."""
    return ModelStoreArgs(
        repo=plan.repo,
        revision=plan.revision,
        served_name=plan.served_name,
        weights_bytes=plan.weights_bytes,
        model_path=plan.model_path,
        namespace=shared.namespace,
        writer_service_account=shared.writer_service_account,
        reader_service_account=shared.reader_service_account,
        downloader_image=store_config.downloaderImage,
        image_mirrors=dict(image_mirrors or {}),
        load_from=plan.load_from,
        storage_class=storage_class,
        existing_claim=store_config.existingClaim,
        bucket=bucket,
        volume_headroom=store_config.volumeHeadroom,
        gated=plan.model.gated,
        hf_token=hf_token if plan.model.gated else None,
        placement=placement,
        staging_storage_class=staging_storage_class,
        adapters=[
            MirrorSource(a.repo, a.revision, a.path, a.bytes_bound, adapter=a.name)
            for a in (plan.lora.adapters if plan.lora else ())
        ],
        signature=plan.model.signature,
    )


class ModelStore(pulumi.ComponentResource):
    """One model's pinned weights: token Secret, volume, and the mirror Job that fills and proves them."""

    mirror_job: k8s.batch.v1.Job
    claim_name: str | None
    model_path: str
    weights_uri: pulumi.Output[str] | None
    bucket_uri: pulumi.Output[str] | None
    load_format: str | None
    reader_service_account: pulumi.Input[str]
    revision: str

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:k8s:ModelStore", name, None, opts)
        self._check(args)
        self.args = args
        self.revision = args.revision
        self.model_path = args.model_path
        self.reader_service_account = args.reader_service_account
        self.labels = {
            contract.LABEL_MODEL: args.served_name,
            contract.LABEL_REVISION: args.revision,
        }
        self.annotations = {contract.ANNOTATION_REPO: args.repo}
        base = args.served_name

        self.hf_token_secret = self._token_secret(name, base) if args.gated else None
        self.volume_claim = None
        self.claim_name = None
        if args.load_from == "volume":
            self.volume_claim = self._volume_claim(name, base)
            self.claim_name = k8s_name(base, "weights")
        elif args.load_from == "existing-claim":
            self.claim_name = args.existing_claim
        self.script = k8s.core.v1.ConfigMap(
            f"{name}-mirror-script",
            metadata=self._metadata(k8s_name(base, "mirror-script"), COMPONENT_MIRROR),
            data={MIRROR_SCRIPT_NAME: MIRROR_SCRIPT.read_text()},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.script_name = self.script.metadata.apply(_name_of)
        self.syncs_to_bucket = args.bucket is not None
        self.trust_config_map = None
        trust = model_signature.trust_pem(args.signature) if args.signature is not None else None
        if trust is not None:
            self.trust_config_map = k8s.core.v1.ConfigMap(
                f"{name}-signature-trust",
                metadata=self._metadata(k8s_name(base, "signature-trust"), COMPONENT_MIRROR),
                data={model_signature.TRUST_FILE: trust},
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.deadline_seconds = mirror_deadline_seconds(
            args.weights_bytes, self.syncs_to_bucket, signed=args.signature is not None
        )
        self.pulumi_wait_seconds = self.deadline_seconds + PULUMI_WAIT_MARGIN_SECONDS
        base_source = MirrorSource(args.repo, args.revision, args.model_path, args.weights_bytes)
        self.mirror_job = self._mirror_job(f"{name}-mirror", base_source)
        # One Job per adapter, on the same volume and with the same script: a new adapter (or a new
        # adapter commit) mirrors only itself and never re-runs the base model's Job.
        self.adapter_jobs = [self._mirror_job(f"{name}-adapter-{a.adapter}-mirror", a) for a in args.adapters]

        # The mirrored copy in the bucket (for other clusters, new regions, audits), whatever the
        # servers read; `weights_uri` is set only when the servers stream from it.
        self.bucket_uri = args.bucket.uri(args.repo, args.revision) if args.bucket else None
        if args.load_from == "bucket":
            self.weights_uri = self.bucket_uri
            self.load_format = "runai_streamer"
        else:
            self.weights_uri = None
            self.load_format = None
        self.register_outputs(
            {
                "claimName": self.claim_name,
                "modelPath": self.model_path,
                "bucketUri": self.bucket_uri,
                "weightsUri": self.weights_uri,
                "revision": self.revision,
                "mirrorJob": self.mirror_job.metadata.apply(_name_of),
                "adapterMirrorJobs": [job.metadata.apply(_name_of) for job in self.adapter_jobs],
            }
        )

    # -- what the servers use --------------------------------------------------------------

    def volume_spec(self, read_only: bool = True) -> dict[str, Any] | None:
        """The pod volume holding the weights (None when servers stream from the bucket)."""
        if self.claim_name is None:
            return None
        return {"name": WEIGHTS_VOLUME, "persistentVolumeClaim": {"claimName": self.claim_name, "readOnly": read_only}}

    def volume_mount(self, read_only: bool = True) -> dict[str, Any] | None:
        """Mounted at the one path every container finds weights under; `model_path` lies inside it."""
        if self.claim_name is None:
            return None
        return {"name": WEIGHTS_VOLUME, "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": read_only}

    def server_storage(self) -> dict[str, Any]:
        """Keyword arguments for components.serving.vllm.ServerStorage: `ServerStorage(**store.server_storage())`."""
        return {
            "claim_name": self.claim_name if self.load_format is None else None,
            "weights_uri": self.weights_uri,
            "service_account": self.reader_service_account,
            "depends_on": [self.mirror_job, *self.adapter_jobs],
            # The mirror script, so the servers can check their files against its manifest at start.
            "check_script_config_map": self.script_name if self.load_format is None else None,
        }

    @property
    def weights_location(self) -> pulumi.Input[str]:
        """What a server passes to `vllm serve`: the bucket URI when streaming, else the local path."""
        if self.load_format == "runai_streamer":
            assert self.weights_uri is not None  # streaming is chosen only with a bucket (_check)
            return self.weights_uri
        return self.model_path

    # -- children --------------------------------------------------------------------------

    @staticmethod
    def _check(args: ModelStoreArgs) -> None:
        # config.py already turns these into user-facing messages; here they guard the wiring.
        if args.gated and args.hf_token is None:
            raise ValueError(f"{args.repo} is gated but no HF token was passed to its ModelStore")
        if args.load_from == "volume" and not args.storage_class:
            raise ValueError(f"{args.repo}: loadFrom volume needs the cluster's ReadWriteMany storage class")
        if args.load_from == "existing-claim" and not args.existing_claim:
            raise ValueError(f"{args.repo}: loadFrom existing-claim needs the claim name")
        if args.load_from == "bucket" and args.bucket is None:
            raise ValueError(f"{args.repo}: loadFrom bucket needs a model bucket")
        for path in [args.model_path, *(a.local_dir for a in args.adapters)]:
            if not path.startswith(contract.MODEL_MOUNT_PATH + "/"):
                raise ValueError(f"{path} is not under {contract.MODEL_MOUNT_PATH}")
        if args.adapters and args.load_from == "bucket":
            raise ValueError(f"{args.repo}: LoRA adapters are read from a volume; loadFrom bucket has none")

    def _metadata(self, resource_name: str, component: str, source: MirrorSource | None = None) -> dict[str, Any]:
        return {
            "name": resource_name,
            "namespace": self.args.namespace,
            "labels": self._labels(component, source),
            "annotations": self._annotations(source),
        }

    def _labels(self, component: str, source: MirrorSource | None = None) -> dict[str, str]:
        labels = {**self.labels, contract.LABEL_COMPONENT: component}
        if source is not None and source.adapter is not None:
            labels[contract.LABEL_REVISION] = source.revision
            labels[contract.LABEL_ADAPTER] = source.adapter
        return labels

    def _annotations(self, source: MirrorSource | None = None) -> dict[str, str]:
        if source is not None and source.adapter is not None:
            return {contract.ANNOTATION_REPO: source.repo}
        return dict(self.annotations)

    def _token_secret(self, name: str, base: str) -> k8s.core.v1.Secret:
        # Output.secret keeps the token encrypted in state even if the caller passed a plain value;
        # the provider also marks a Secret's data secret, this makes it independent of that.
        return k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata=self._metadata(k8s_name(base, "hf-token"), COMPONENT_MIRROR),
            type="Opaque",
            string_data={contract.HF_TOKEN_KEY: pulumi.Output.secret(self.args.hf_token)},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _volume_claim(self, name: str, base: str) -> k8s.core.v1.PersistentVolumeClaim:
        size = f"{volume_size_gib(self.args.volume_bytes, self.args.volume_headroom)}Gi"
        metadata = self._metadata(k8s_name(base, "weights"), "model-store")
        metadata["annotations"][contract.ANNOTATION_PLANNED_STORAGE] = size
        return k8s.core.v1.PersistentVolumeClaim(
            f"{name}-weights",
            metadata=metadata,
            spec={
                # Every replica on every node reads the same files; RWO would pin them to one node.
                "accessModes": ["ReadWriteMany"],
                "storageClassName": self.args.storage_class,
                "resources": {"requests": {"storage": size}},
            },
            # The request is set once, at creation. A later change of the computed size (other
            # weights figure, other headroom) would otherwise fail `pulumi up`: the API server
            # refuses to shrink a claim, and efs-sc cannot expand one. The annotation above keeps
            # the current plan visible; growing a claim is a manual step (docs/model-store.md).
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["spec.resources.requests.storage"]),
        )

    def _staging_volume(self) -> dict[str, Any]:
        """load_from bucket: a per-pod RWO claim for the download, deleted with the pod."""
        claim_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {
                "requests": {"storage": f"{volume_size_gib(self.args.weights_bytes, self.args.volume_headroom)}Gi"}
            },
        }
        if self.args.staging_storage_class:
            claim_spec["storageClassName"] = self.args.staging_storage_class
        return {
            "name": WEIGHTS_VOLUME,
            "ephemeral": {
                "volumeClaimTemplate": {
                    "metadata": {"labels": {**self.labels, contract.LABEL_COMPONENT: COMPONENT_MIRROR}},
                    "spec": claim_spec,
                }
            },
        }

    def _signature_steps(
        self, source: MirrorSource, signature: SignatureConfig, resources: dict[str, dict[str, str]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The verify-signature and seal containers, and the volume of the trusted key (if any)."""
        weights_mount = {"name": WEIGHTS_VOLUME, "mountPath": contract.MODEL_MOUNT_PATH}
        verify_mounts = [{**weights_mount, "readOnly": True}]
        volumes: list[dict[str, Any]] = []
        if self.trust_config_map is not None:
            volumes.append(
                {"name": "signature-trust", "configMap": {"name": self.trust_config_map.metadata.apply(_name_of)}}
            )
            verify_mounts.append(
                {"name": "signature-trust", "mountPath": model_signature.TRUST_MOUNT_PATH, "readOnly": True}
            )
        verify = {
            "name": "verify-signature",
            "image": images.mirrored(model_signature.VERIFIER_IMAGE, self.args.image_mirrors),
            # The download bookkeeping (and the deferred manifest in it) is not part of the model.
            "args": model_signature.verifier_args(signature, source.local_dir, [f"{source.local_dir}/.cache"]),
            "resources": resources,
            # Sigstore's verifier keeps its trust root (TUF metadata) under HOME/XDG dirs: on the
            # Job's /tmp emptyDir, so the root filesystem stays read-only.
            "env": [
                {"name": "HOME", "value": "/tmp"},
                {"name": "XDG_CACHE_HOME", "value": "/tmp/.cache"},
                {"name": "XDG_DATA_HOME", "value": "/tmp/.local/share"},
            ],
            "volumeMounts": [*verify_mounts, {"name": TMP_VOLUME, "mountPath": "/tmp"}],
            # It only reads the weights, so it runs non-root even where fetch had to be root.
            "securityContext": pod_security.container_security_context(),
        }
        seal = {
            "name": "seal",
            "image": self.args.downloader_image,
            "command": [
                "python3",
                f"{SCRIPT_MOUNT_PATH}/{MIRROR_SCRIPT_NAME}",
                "seal",
                "--local-dir",
                source.local_dir,
                "--signature-note",
                f"verified {signature.describe()}",
            ],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
            "volumeMounts": [
                weights_mount,
                {"name": "mirror-script", "mountPath": SCRIPT_MOUNT_PATH, "readOnly": True},
            ],
            # It writes the manifest into the folder fetch wrote, so it runs as fetch ran.
            "securityContext": pod_security.container_security_context(
                non_root=not mirror_runs_as_root(self.args.load_from)
            ),
        }
        return [verify, seal], volumes

    def _mirror_job(self, resource_name: str, source: MirrorSource) -> k8s.batch.v1.Job:
        args = self.args
        ephemeral = SCRATCH_GIB
        resources = mirror_resources(source.size_bytes, ephemeral)
        # Only the base weights carry the publisher's signature; adapters come from other repos.
        signature = args.signature if source.adapter is None else None
        deadline = mirror_deadline_seconds(source.size_bytes, self.syncs_to_bucket, signed=signature is not None)
        wait = deadline + PULUMI_WAIT_MARGIN_SECONDS
        if args.load_from == "bucket":
            weights_volume = self._staging_volume()
        else:
            weights_volume = {"name": WEIGHTS_VOLUME, "persistentVolumeClaim": {"claimName": self.claim_name}}
        # Root only where the volume may not be writable by anyone else (ROOT_ON_SHARED_VOLUME_REASON).
        fetch_non_root = not mirror_runs_as_root(args.load_from)
        env: list[dict[str, Any]] = [
            # HF_HUB_OFFLINE is deliberately absent: this is the one pod that must reach the Hub.
            {"name": "HOME", "value": HOME_PATH},
            {"name": "HF_HOME", "value": f"{SCRATCH_MOUNT_PATH}/hf-home"},
            {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
            {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
        ]
        if self.hf_token_secret is not None:
            env.append(
                {
                    "name": contract.HF_TOKEN_KEY,
                    "valueFrom": {
                        "secretKeyRef": {
                            "name": self.hf_token_secret.metadata.apply(_name_of),
                            "key": contract.HF_TOKEN_KEY,
                        }
                    },
                }
            )
        fetch = {
            "name": "fetch",
            "image": images.mirrored(args.downloader_image, args.image_mirrors),
            # `command` replaces the image's entrypoint (`vllm serve` in the vLLM image). The
            # revision is the pinned commit, never a branch: the bytes mirrored are the bytes served.
            # The globs go to `hf download` and filter what the script expects from the Hub alike.
            "command": [
                "python3",
                f"{SCRIPT_MOUNT_PATH}/{MIRROR_SCRIPT_NAME}",
                "fetch",
                "--repo",
                source.repo,
                "--revision",
                source.revision,
                "--local-dir",
                source.local_dir,
                *file_selection_args(),
                *(["--include", signature.file, "--defer-manifest"] if signature is not None else []),
            ],
            "env": env,
            "resources": resources,
            "volumeMounts": [
                {"name": WEIGHTS_VOLUME, "mountPath": contract.MODEL_MOUNT_PATH},
                {"name": "mirror-script", "mountPath": SCRIPT_MOUNT_PATH, "readOnly": True},
                {"name": "scratch", "mountPath": SCRATCH_MOUNT_PATH},
                {"name": TMP_VOLUME, "mountPath": "/tmp"},
            ],
            "securityContext": pod_security.container_security_context(non_root=fetch_non_root),
        }
        init_containers: list[dict[str, Any]] = []
        containers = [fetch]
        extra_volumes: list[dict[str, Any]] = []
        if signature is not None:
            steps, extra_volumes = self._signature_steps(source, signature, resources)
            # fetch -> verify-signature -> seal: the manifest appears only after the signature held.
            init_containers, containers = [fetch, steps[0]], [steps[1]]
        if args.bucket is not None:
            destination = args.bucket.uri(source.repo, source.revision)
            sync_env: list[dict[str, Any]] = [
                {"name": "HOME", "value": SYNC_HOME_PATH},
                {"name": "CLOUDSDK_CONFIG", "value": GCLOUD_CONFIG_PATH},
            ]
            if args.bucket.scheme == "s3" and args.bucket.region is not None:
                sync_env.append({"name": "AWS_REGION", "value": args.bucket.region})
            sync = {
                "name": "sync",
                "image": images.mirrored(SYNC_IMAGES[args.bucket.scheme], args.image_mirrors),
                "command": ["/bin/sh", "-c", sync_script(args.bucket.scheme, source.local_dir, destination)],
                "env": sync_env,
                # Same ephemeral figure as fetch (scratch only): a pod's effective request is the
                # larger of its init containers' and the sum of its app containers', so this does
                # not double it.
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": f"{ephemeral}Gi"},
                    "limits": {"memory": "2Gi", "ephemeral-storage": f"{ephemeral}Gi"},
                },
                "volumeMounts": [
                    {"name": WEIGHTS_VOLUME, "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": True},
                    {"name": "scratch", "mountPath": SCRATCH_MOUNT_PATH},
                    {"name": TMP_VOLUME, "mountPath": "/tmp"},
                ],
                # Always non-root: it only reads the verified files (world-readable) and talks to the
                # bucket with the pod's cloud identity.
                "securityContext": pod_security.container_security_context(),
            }
            # Download and verification must succeed before anything reaches the bucket.
            init_containers, containers = init_containers + containers, [sync]
        pod_spec: dict[str, Any] = {
            "serviceAccountName": args.writer_service_account,
            # Retries are whole pods (backoffLimit), so each attempt starts from a clean container.
            "restartPolicy": "Never",
            # The cloud identity (EKS Pod Identity, GKE Workload Identity) does not read the Kubernetes
            # token, and the mirror never calls the Kubernetes API.
            "automountServiceAccountToken": False,
            "securityContext": pod_security.pod_security_context(non_root=fetch_non_root),
            "containers": containers,
            "volumes": [
                weights_volume,
                {
                    "name": "mirror-script",
                    "configMap": {"name": self.script.metadata.apply(_name_of), "defaultMode": 0o555},
                },
                {"name": "scratch", "emptyDir": {"sizeLimit": f"{SCRATCH_GIB}Gi"}},
                {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}},
                *extra_volumes,
            ],
        }
        if init_containers:
            pod_spec["initContainers"] = init_containers
        if args.placement is not None:
            pod_spec["nodeSelector"] = args.placement.node_selector
            pod_spec["tolerations"] = args.placement.tolerations
        depends = [
            r for r in (self.volume_claim, self.hf_token_secret, self.script, self.trust_config_map) if r is not None
        ]
        # The name carries the revision: a new commit is a new Job (Job templates are immutable),
        # and `kubectl get jobs` shows which commit each mirror fetched. An adapter's Job is named
        # after the adapter (names are unique across the stack).
        owner = source.adapter or args.served_name
        return k8s.batch.v1.Job(
            resource_name,
            metadata=self._metadata(k8s_name(owner, f"mirror-{source.revision[:12]}"), COMPONENT_MIRROR, source),
            spec={
                "backoffLimit": MIRROR_BACKOFF_LIMIT,
                "activeDeadlineSeconds": deadline,
                # ttlSecondsAfterFinished is deliberately not set: the cluster would delete the
                # finished Job, and the next `pulumi up` would recreate it and mirror again.
                "template": {
                    "metadata": {
                        "labels": self._labels(COMPONENT_MIRROR, source),
                        "annotations": {
                            **self._annotations(source),
                            **pod_security.exception_annotation(
                                {} if fetch_non_root else {pod_security.RUN_AS_NON_ROOT: ROOT_ON_SHARED_VOLUME_REASON}
                            ),
                        },
                    },
                    "spec": pod_spec,
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=depends,
                # The name is fixed per revision, so a changed spec (Job templates are immutable)
                # must free the name before the replacement runs; the re-run only re-verifies.
                delete_before_replace=True,
                # The provider waits for the Job to complete (what servers depend on), but gives up
                # after 10 minutes by default; a 140 GB mirror takes hours. It waits a margin past
                # the Job's deadline so the Job's own failure reason is what `pulumi up` reports.
                custom_timeouts=pulumi.CustomTimeouts(create=f"{wait}s", update=f"{wait}s"),
            ),
        )
