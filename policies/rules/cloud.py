"""bucket-private and gpu-pool-tainted: the cloud side of the path.

Property names are the ones the Pulumi engine sends (camelCase inputs of pulumi-aws 7 and
pulumi-gcp 10): aws:s3/bucketPublicAccessBlock (blockPublicAcls, blockPublicPolicy,
ignorePublicAcls, restrictPublicBuckets), aws:s3/bucketServerSideEncryptionConfiguration
(rules[].applyServerSideEncryptionByDefault.sseAlgorithm), aws:s3/bucket:Bucket (acl),
gcp:storage/bucket:Bucket (publicAccessPrevention, uniformBucketLevelAccess, encryption),
aws:eks/nodeGroup:NodeGroup (instanceTypes, amiType, taints[{key, value, effect: NO_SCHEDULE}]),
gcp:container/nodePool:NodePool (nodeConfig.machineType, nodeConfig.guestAccelerators,
nodeConfig.taints[{key, value, effect: NO_SCHEDULE}]).

Encryption: S3 has encrypted every new object with SSE-S3 since January 2023 and GCS encrypts all
data at rest with Google-managed keys, so both defaults are accepted; what this rule rejects is an
explicit S3 encryption configuration that names no algorithm, and a public ACL. On GCS a CMEK
(encryption.defaultKmsKeyName) is accepted but not required.
"""

from __future__ import annotations

from common import gpus
from common.contract import GPU_TAINT_KEY
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown

S3_PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
S3_ACCOUNT_PAB = "aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock"
S3_SSE = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
S3_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
GCS_BUCKET = "gcp:storage/bucket:Bucket"
EKS_NODE_GROUPS = ("aws:eks/nodeGroup:NodeGroup", "eks:index:ManagedNodeGroup")
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET_TYPES = (S3_PAB, *S3_SSE, *S3_BUCKETS, GCS_BUCKET)
POOL_TYPES = (*EKS_NODE_GROUPS, GKE_NODE_POOL)

PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
_SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")
_PUBLIC_ACLS = ("public-read", "public-read-write", "authenticated-read")
# EC2 accelerated-computing families with NVIDIA GPUs, for instance types the catalog does not list
# (AWS "Accelerated computing instances" page: P3/P4/P5/P6, G4dn/G5/G6/G6e/Gr6).
_AWS_GPU_FAMILIES = (
    "p3",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6e-gb200",
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "gr6",
    "g6f",
)
# GCE machine series that come with GPUs attached (GCP "GPU machine types": A2, A3, A4, G2, G4).
_GCP_GPU_SERIES = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")


def bucket_private(resource_type: str, name: str, props: dict, config: dict) -> list[Finding]:
    kind = resource_type.rsplit(":", 1)[-1]
    ref = f"{kind}/{name}"
    if resource_type == S3_PAB:
        off = [f for f in PAB_FLAGS if props.get(f) is not True and not is_unknown(props.get(f))]
        if off:
            return [
                Finding(
                    f"{ref}: the S3 public access block leaves {', '.join(off)} unset or false; set all four "
                    f"flags to true so the model bucket can never be made public."
                )
            ]
    elif resource_type in S3_SSE:
        rules = as_list(props.get("rules"))
        algos = [as_dict(as_dict(r).get("applyServerSideEncryptionByDefault")).get("sseAlgorithm") for r in rules]
        if not rules or not any(a in _SSE_ALGORITHMS or is_unknown(a) for a in algos):
            return [
                Finding(
                    f"{ref}: the bucket encryption configuration names no SSE algorithm; set "
                    f"rules[0].applyServerSideEncryptionByDefault.sseAlgorithm to 'aws:kms' or 'AES256'."
                )
            ]
    elif resource_type in S3_BUCKETS:
        acl = as_str(props.get("acl"))
        if acl in _PUBLIC_ACLS:
            return [
                Finding(
                    f"{ref}: the bucket ACL is '{acl}', which makes model weights readable outside the "
                    f"account; remove the ACL and add a BucketPublicAccessBlock with all flags true."
                )
            ]
    elif resource_type == GCS_BUCKET:
        out = []
        pap = props.get("publicAccessPrevention")
        if pap != "enforced" and not is_unknown(pap):
            out.append(
                Finding(
                    f"{ref}: publicAccessPrevention is '{pap or 'inherited'}', not 'enforced'; set "
                    f"publicAccessPrevention: 'enforced' so the model bucket can never be made public."
                )
            )
        ubla = props.get("uniformBucketLevelAccess")
        if ubla is not True and not is_unknown(ubla):
            out.append(
                Finding(
                    f"{ref}: uniformBucketLevelAccess is not enabled, so per-object ACLs can still "
                    f"grant public reads; set uniformBucketLevelAccess: true."
                )
            )
        return out
    return []


def node_pool_has_gpus(resource_type: str, props: dict) -> bool:
    if resource_type in EKS_NODE_GROUPS:
        ami = as_str(props.get("amiType")) or ""
        if "NVIDIA" in ami or "_GPU" in ami:
            return True
        for t in [*as_list(props.get("instanceTypes")), props.get("instanceType")]:
            t = as_str(t)
            if t and (gpus.find_machine("aws", t) or t.split(".", 1)[0] in _AWS_GPU_FAMILIES):
                return True
        return False
    if resource_type == GKE_NODE_POOL:
        node_config = as_dict(props.get("nodeConfig"))
        if any((as_dict(a).get("count") or 0) != 0 for a in as_list(node_config.get("guestAccelerators"))):
            return True
        machine = as_str(node_config.get("machineType")) or ""
        return bool(gpus.find_machine("gcp", machine)) or machine.startswith(_GCP_GPU_SERIES)
    return False


_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def pool_taints(resource_type: str, props: dict) -> list[dict]:
    """The pool's taints in Kubernetes form: [{key, value, effect: NoSchedule}]."""
    raw = (
        as_list(props.get("taints"))
        if resource_type in EKS_NODE_GROUPS
        else as_list(as_dict(props.get("nodeConfig")).get("taints"))
    )
    out = []
    for t in raw:
        t = as_dict(t)
        effect = as_str(t.get("effect")) or ""
        out.append({"key": t.get("key"), "value": t.get("value"), "effect": _EFFECTS.get(effect, effect)})
    return out


def gpu_pool_tainted(resource_type: str, name: str, props: dict, config: dict) -> list[Finding]:
    if not node_pool_has_gpus(resource_type, props):
        return []
    taints = (
        as_list(props.get("taints"))
        if resource_type in EKS_NODE_GROUPS
        else as_list(as_dict(props.get("nodeConfig")).get("taints"))
    )
    if is_unknown(props.get("taints")):
        return []
    key = config.get("taintKey") or GPU_TAINT_KEY
    ok = any(as_dict(t).get("key") == key and as_dict(t).get("effect") in ("NO_SCHEDULE", "NoSchedule") for t in taints)
    if ok:
        return []
    kind = resource_type.rsplit(":", 1)[-1]
    where = "taints" if resource_type in EKS_NODE_GROUPS else "nodeConfig.taints"
    return [
        Finding(
            f"{kind}/{name}: this pool has GPUs but no '{key}' taint with effect NO_SCHEDULE, so any pod "
            f"can land on (and block) the GPU nodes; add {where}: [{{key: '{key}', value: 'present', "
            f"effect: 'NO_SCHEDULE'}}]."
        )
    ]
