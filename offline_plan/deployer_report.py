"""plan.md, "Where `pulumi up` runs from": the runner that deploys the stack, the network path from it
to the cluster API, and the identity it deploys as, read from what the program recorded.

A deployer stack (role: deployer, docs/deployer.md) has a plan of its own shape: it creates no
cluster, model or Kubernetes object, so the serving sections (models, pools, images, pod security,
waits) would all be empty; it shows the runner it builds instead.
"""

from __future__ import annotations

from typing import Any

from offline_plan.mock_runtime import Evaluation

EKS_CLUSTER = "aws:eks/cluster:Cluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
CODEBUILD_PROJECT = "aws:codebuild/project:Project"
CODEBUILD_WEBHOOK = "aws:codebuild/webhook:Webhook"
PLACEHOLDER = " (placeholder: the id a real preview looks up)"


def is_deployer_stack(evaluation: Evaluation) -> bool:
    return "runnerLabel" in evaluation.outputs


def _eks_path(evaluation: Evaluation, cluster: Any) -> str:
    vpc = cluster.inputs.get("vpcConfig") or {}
    public, private = vpc.get("endpointPublicAccess", True), vpc.get("endpointPrivateAccess", False)
    parts = []
    if public:
        cidrs = vpc.get("publicAccessCidrs") or []
        parts.append(f"public endpoint from {', '.join(cidrs)}" if cidrs else "public endpoint open to every address")
    if private:
        parts.append("private endpoint inside the VPC")
    rules = [
        r
        for r in evaluation.of_type(INGRESS_RULE)
        if r.inputs.get("referencedSecurityGroupId") and r.inputs.get("fromPort") == 443
    ]
    for r in rules:
        group = str(r.inputs["referencedSecurityGroupId"])
        parts.append(
            f"the cluster security group admits {group}{PLACEHOLDER if 'mock' in group else ''} on TCP 443 "
            f"(`{r.name}`), before the first Kubernetes call"
        )
    return "; ".join(parts) or "no endpoint (EKS refuses this)"


def _gke_path(cluster: Any) -> str:
    inputs = cluster.inputs
    parts = []
    dns = ((inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig")) or {}
    if dns:
        reach = "open to traffic from outside Google Cloud" if dns.get("allowExternalTraffic") else "Google Cloud only"
        parts.append(f"DNS-based endpoint, {reach} (IAM authorizes every call)")
    private = (inputs.get("privateClusterConfig") or {}).get("enablePrivateEndpoint")
    networks = inputs.get("masterAuthorizedNetworksConfig")
    if private:
        parts.append("IP endpoint private only")
    elif networks is not None:
        blocks = [str(b.get("cidrBlock")) for b in networks.get("cidrBlocks") or []]
        parts.append(f"public IP endpoint from {', '.join(blocks) or 'no address'} (master authorized networks)")
    else:
        parts.append("public IP endpoint open to every address (GKE authenticates every call)")
    return "; ".join(parts)


def _identity(cloud: str, runner: str) -> str:
    if runner == "codebuild":
        return (
            "the CodeBuild project's service role (the deployer stack's output `runnerRoleArn`); it creates the "
            "cluster, so EKS makes it cluster admin (bootstrapClusterCreatorAdminPermissions)"
        )
    if runner == "self-hosted":
        return "the runner's own credentials"
    if cloud == "gcp":
        return "`vars.GCP_SERVICE_ACCOUNT` through Workload Identity Federation (google-github-actions/auth)"
    return "`vars.AWS_ROLE_ARN`, assumed through GitHub's OIDC token (aws-actions/configure-aws-credentials)"


def deployer_lines(evaluation: Evaluation) -> list[str]:
    """The section for a served stack."""
    declared = evaluation.outputs.get("deployer")
    if not isinstance(declared, dict):
        return []
    runner = str(declared.get("runner"))
    clusters = evaluation.of_type(EKS_CLUSTER) + evaluation.of_type(GKE_CLUSTER)
    cloud = "gcp" if evaluation.of_type(GKE_CLUSTER) else "aws"
    rows = [
        ("runner", f"{runner} (deployer.runner)"),
        ("runs-on", f"`{declared.get('runsOn')}`"),
    ]
    for cluster in clusters:
        path = _eks_path(evaluation, cluster) if cluster.type == EKS_CLUSTER else _gke_path(cluster)
        rows.append((f"path to the API of `{cluster.name}`", path))
    if not clusters:
        rows.append(("path to the API", "the existing cluster's endpoint: what the runner reaches is its own business"))
        cloud = "existing"
    rows.append(("deploys as", _identity(cloud, runner)))
    out = ["## Where `pulumi up` runs from", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    if runner == "codebuild":
        out += [
            "",
            (
                f"Order: `pulumi up -s {evaluation.stack}-deployer` first (it builds the runner and the VPC), then "
                f"this stack on that runner; destroy this stack first (docs/deployer.md)."
            ),
        ]
    return [*out, ""]


def render_deployer_plan(evaluation: Evaluation, verdicts: list[Any], not_preview: str) -> str:
    """plan.md of a deployer stack."""
    outputs = evaluation.outputs
    project = next(iter(evaluation.of_type(CODEBUILD_PROJECT)), None)
    webhook = next(iter(evaluation.of_type(CODEBUILD_WEBHOOK)), None)
    events = [
        f.get("pattern")
        for group in ((webhook.inputs.get("filterGroups") if webhook else None) or [])
        for f in group.get("filters") or []
        if f.get("type") == "EVENT"
    ]
    out = [f"# Offline plan: stack `{evaluation.stack}` (a deployer stack)", "", f"> {not_preview}", ""]
    out += [
        "## Where `pulumi up` runs from",
        "",
        "| | |",
        "|---|---|",
        "| runner | github-hosted (`.github/workflows/deploy.yml`, or any machine with AWS credentials) |",
        "| path | AWS APIs only: this stack creates no cluster |",
        "| deploys as | `vars.AWS_ROLE_ARN`, assumed through GitHub's OIDC token |",
        "",
        "## The runner this stack builds",
        "",
        "| | |",
        "|---|---|",
        f"| for | `{outputs.get('servesCluster')}` (its stack sets cluster.network.vpc: deployer) |",
        f"| runs-on label | `{outputs.get('runnerLabel')}` |",
        f"| CodeBuild project | `{outputs.get('codebuildProject')}` |",
        f"| webhook events | {', '.join(map(str, events)) or 'none'} |",
        f"| build timeout | {outputs.get('buildTimeoutMinutes')} min (CodeBuild allows 5 to 2160) |",
        f"| image | `{project.inputs.get('environment', {}).get('image') if project else ''}` |",
        (
            f"| subnets | {len(outputs.get('privateSubnetIds') or [])} private (the runner, the served cluster, "
            "its nodes), "
            f"{len(outputs.get('publicSubnetIds') or [])} public |"
        ),
        "| security group | egress only; the served cluster admits it on TCP 443 |",
        "",
        "## Policy verdicts",
        "",
        "No violations." if not verdicts else f"{len(verdicts)} finding(s).",
        "",
        f"## Resources ({len(evaluation.resources)})",
        "",
        "```",
    ]
    out += [f"{'  ' * depth}{type_}  {name}" for depth, type_, name in evaluation.tree()]
    out += ["```", ""]
    return "\n".join(out)
