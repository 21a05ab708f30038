"""Stack rules: facts that only hold across resources.

gpu-toleration-matches-pool: a GPU pod must tolerate every hard taint (NoSchedule, NoExecute) of
at least one GPU pool in the stack, value included; tolerating the key with the wrong value leaves
the pod Pending exactly as no toleration would.

server-disruption-budget: a GPU server with more than one replica has a PodDisruptionBudget in its
namespace whose selector matches its pods, so a node drain or upgrade never takes every replica
(and its minutes-long weight load) down at once.

bucket-public-access-block-present: every S3 bucket of the stack has a BucketPublicAccessBlock (the
bucket resource itself has no such setting, so bucket-private alone passes a bare bucket; checkov
CKV2_AWS_6 asks the same). A block belongs to a bucket by, in order: the engine's property
dependency of its `bucket` input on the bucket's URN; its `bucket` value equal to the bucket's
`bucket`/`id`/name; its `bucket` value being the bucket's auto-name (`<name>-<suffix>`, how Pulumi
names a bucket without an explicit `bucket`). When `bucket` is still unknown during preview (a new
bucket's id) and no dependency is given, the blocks with unknown buckets cover as many buckets as
there are such blocks. An AccountPublicAccessBlock with every flag on covers every bucket. A missing
encryption configuration is not a violation: S3 encrypts every new object (SSE-S3) since January
2023 and that cannot be turned off (see policies/README.md).
"""

from __future__ import annotations

from policies.gpu import is_gpu_container, pod_tolerates, pod_uses_gpus
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.cloud import (
    PAB_FLAGS,
    POOL_TYPES,
    S3_ACCOUNT_PAB,
    S3_BUCKETS,
    S3_PAB,
    node_pool_has_gpus,
    pool_taints,
)
from policies.workloads import workload


def gpu_pools(resources: list[Resource]) -> list[tuple[Resource, list[dict]]]:
    return [
        (r, pool_taints(r.type, r.props))
        for r in resources
        if r.type in POOL_TYPES and node_pool_has_gpus(r.type, r.props)
    ]


def _describe(taints: list[dict]) -> str:
    return ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in taints) or "no taints"


def gpu_toleration_matches_pool(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    pools = gpu_pools(resources)
    if not pools:
        return []
    out = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None:
            continue
        for pod in w.pods:
            if not pod_uses_gpus(pod):
                continue
            fits = False
            for _, taints in pools:
                hard = [t for t in taints if t["effect"] in ("NoSchedule", "NoExecute")]
                if all(
                    pod_tolerates(
                        pod,
                        as_str(t["key"]) or "",
                        t["effect"],
                        None if is_unknown(t.get("value")) else (as_str(t.get("value")) or ""),
                    )
                    for t in hard
                ):
                    fits = True
                    break
            if not fits:
                gpu = next(c for c in pod.containers if is_gpu_container(c))
                pool_list = "; ".join(f"{p.kind}/{p.name} ({_describe(t)})" for p, t in pools)
                out.append(
                    (
                        r,
                        Finding(
                            f"{w.ref}: the pod of GPU {gpu.label} ({pod.where}) does not tolerate the taints of any "
                            f"GPU pool in the stack [{pool_list}]; add tolerations that match one pool's taints (key, "
                            f"value and effect) or the pod will stay Pending.",
                            gpu.name,
                        ),
                    )
                )
    return out


def selector_matches(selector: dict, labels: dict) -> bool:
    """Kubernetes LabelSelector semantics; an empty selector in policy/v1 selects every pod."""
    for k, v in as_dict(selector.get("matchLabels")).items():
        if is_unknown(v) or is_unknown(labels.get(k)):
            continue
        if labels.get(k) != v:
            return False
    for expr in as_list(selector.get("matchExpressions")):
        expr = as_dict(expr)
        key, op, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _same_namespace(a: str | None, b: str | None) -> bool:
    if is_unknown(a) or is_unknown(b):
        return True
    return (a or "default") == (b or "default")


def server_disruption_budget(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    pdbs = [r for r in resources if r.is_kubernetes and r.kind == "PodDisruptionBudget"]
    out = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None or not w.long_running or w.replicas is None or w.replicas <= 1:
            continue
        for pod in w.pods:
            if not pod_uses_gpus(pod):
                continue
            covered = any(
                _same_namespace(p.namespace, w.namespace)
                and isinstance(as_dict(p.props.get("spec")).get("selector"), dict)
                and selector_matches(as_dict(p.props["spec"]["selector"]), pod.labels)
                for p in pdbs
            )
            if not covered:
                gpu = next(c for c in pod.containers if is_gpu_container(c))
                out.append(
                    (
                        r,
                        Finding(
                            f"{w.ref}: this GPU server ({gpu.label}) runs {w.replicas:g} replicas but no "
                            f"PodDisruptionBudget in namespace '{w.namespace or 'default'}' selects its pods "
                            f"({pod.where}); add a PodDisruptionBudget with maxUnavailable: 1 and a selector matching "
                            f"the pod labels so a drain never takes all replicas down at once.",
                            gpu.name,
                        ),
                    )
                )
                break
    return out


def toleration_rule_not_applicable(resources: list[Resource]) -> str | None:
    if not gpu_pools(resources):
        return "the stack declares no GPU node pool (its cluster's pools are managed elsewhere)"
    return None


def _bucket_of(block: Resource, buckets: list[Resource]) -> Resource | str | None:
    """The bucket a BucketPublicAccessBlock belongs to; "unknown" when its `bucket` is not known
    yet; None when it names a bucket outside the stack."""
    by_urn = {b.urn: b for b in buckets if b.urn}
    for urn in block.property_dependencies.get("bucket", []):
        if urn in by_urn:
            return by_urn[urn]
    value = block.props.get("bucket")
    if is_unknown(value):
        return "unknown"
    value = as_str(value)
    if not value:
        return None
    for b in buckets:
        if value in (as_str(b.props.get("bucket")), as_str(b.props.get("id")), b.name):
            return b
    # Auto-naming: `<logical name>-<random suffix>` or `<bucketPrefix><suffix>`; the longest
    # matching name wins, so a block of "models-logs-1a2b" does not land on bucket "models".
    candidates = [(len(b.name), b) for b in buckets if value.startswith(b.name + "-")]
    candidates += [(len(p), b) for b in buckets if (p := as_str(b.props.get("bucketPrefix"))) and value.startswith(p)]
    return max(candidates, key=lambda c: c[0])[1] if candidates else None


def _account_blocks_everything(resources: list[Resource]) -> bool:
    return any(
        r.type == S3_ACCOUNT_PAB and all(r.props.get(f) is True or is_unknown(r.props.get(f)) for f in PAB_FLAGS)
        for r in resources
    )


def bucket_public_access_block_present(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    buckets = [r for r in resources if r.type in S3_BUCKETS]
    if not buckets or _account_blocks_everything(resources):
        return []
    covered: set[int] = set()
    unknown = 0
    for block in (r for r in resources if r.type == S3_PAB):
        target = _bucket_of(block, buckets)
        if target == "unknown":
            unknown += 1
        elif isinstance(target, Resource):
            covered.add(id(target))
    uncovered = [b for b in buckets if id(b) not in covered]
    if len(uncovered) <= unknown:
        return []  # preview: as many blocks of not-yet-known buckets as buckets without a block
    out = []
    for b in uncovered:
        kind = b.type.rsplit(":", 1)[-1]
        why = "no BucketPublicAccessBlock in the stack names it"
        if unknown:
            why = (
                f"the stack has {len(uncovered)} S3 buckets without a matching block and only {unknown} "
                f"block{'s' if unknown != 1 else ''} whose bucket is not known yet"
            )
        out.append(
            (
                b,
                Finding(
                    f"{kind}/{b.name}: this S3 bucket has no public access block ({why}), so a bucket policy or ACL "
                    f"can still make the model weights public; add an aws.s3.BucketPublicAccessBlock with "
                    f"bucket=<this bucket>.id and blockPublicAcls, blockPublicPolicy, ignorePublicAcls and "
                    f"restrictPublicBuckets all true."
                ),
            )
        )
    return out


def bucket_rule_not_applicable(resources: list[Resource]) -> str | None:
    if not any(r.type in S3_BUCKETS for r in resources):
        return "the stack declares no S3 bucket"
    return None
