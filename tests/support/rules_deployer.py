"""Environment rule: the runner that runs `pulumi up` of a stack can reach the cluster API it deploys to.

`deployer-reaches-cluster-endpoint`: for each stack, the runner the committed workflow uses for it
(.github/workflows/deploy.yml's job that calls pulumi-up.yml with that stack: its `runner` and
`runs_on`) is the one the stack file declares (`deployer.runner`, exported as `deployer`), and it
has a network path to the API endpoint of every cluster the stack creates:

- github-hosted: only over the internet, to a public endpoint open to every address. GitHub-hosted
  runners' addresses cannot be allow-listed: "Since there are so many IP address ranges for
  GitHub-hosted runners, we do not recommend that you use these as allowlists for your internal
  resources", and "The list of GitHub Actions IP addresses returned by the API is updated once a
  week" (GitHub Docs, "GitHub-hosted runners" reference, formerly "About GitHub-hosted runners",
  section "IP addresses", https://docs.github.com/en/actions/reference/runners/github-hosted-runners),
  and EKS takes at most 40 publicAccessCidrs (EKS service quotas). So a private-only endpoint, or a
  public one restricted to publicAccessCidrs / GKE master authorized networks, is a violation, unless
  (GKE) the DNS-based control-plane endpoint admits traffic from outside Google Cloud
  (controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic; "About GKE control plane
  access", https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation).
- codebuild (an AWS CodeBuild-hosted GitHub Actions runner in the deployer stack's private subnets):
  an EKS cluster in the runner's VPC with private access on, and a recorded ingress rule on the
  cluster security group admitting the runner's security group on TCP 443, which the Kubernetes
  provider waits for. With the private endpoint, API requests from inside the VPC reach the control
  plane's interfaces, and "you must ensure that your Amazon EKS control plane security group contains
  rules to allow ingress traffic on port 443 from your connected network" (EKS User Guide, "Cluster
  API server endpoint", https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html).
  The identity it deploys as (the project's service role) creates the cluster, so it must be the
  bootstrap cluster admin (accessConfig.bootstrapClusterCreatorAdminPermissions; EKS User Guide,
  "Grant IAM users access to Kubernetes with EKS access entries",
  https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html) or hold an access entry.
- self-hosted, and existing clusters (no cluster resource): what the runner reaches is the runner
  operator's business; the rule cannot see that network and says nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.cluster.aws.network import DEPLOYER_RUNNER_TAG
from offline_plan.mock_runtime import MOCK_CLUSTER_SG, RecordedResource, mock_id
from tests.support import paths
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

NAME = "deployer-reaches-cluster-endpoint"
WORKFLOWS = paths.ROOT / ".github" / "workflows"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SUBNET = "aws:ec2/subnet:Subnet"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
K8S_PROVIDER = "pulumi:providers:kubernetes"
GET_SECURITY_GROUPS = "aws:ec2/getSecurityGroups:getSecurityGroups"
GET_SUBNET = "aws:ec2/getSubnet:getSubnet"
API_PORT = 443
WORLD = "0.0.0.0/0"


@dataclass(frozen=True)
class WorkflowRunner:
    """The runner a workflow job gives `pulumi up` of one stack."""

    stack: str
    job: str
    runner: str
    runs_on: str


def _inputs_default(workflow: dict, name: str) -> Any:
    on = workflow.get("on", workflow.get(True)) or {}
    return (((on.get("workflow_call") or {}).get("inputs") or {}).get(name) or {}).get("default")


@functools.cache
def workflow_runners(workflows: Path = WORKFLOWS) -> dict[str, WorkflowRunner]:
    """Stack -> the runner deploy.yml's job gives it through pulumi-up.yml."""
    deploy = yaml.safe_load((workflows / "deploy.yml").read_text())
    reusable = yaml.safe_load((workflows / "pulumi-up.yml").read_text())
    up_job = next(iter((reusable.get("jobs") or {}).values()))
    runs_on_expr = str(up_job.get("runs-on"))
    found: dict[str, WorkflowRunner] = {}
    for job_id, job in (deploy.get("jobs") or {}).items():
        if not str(job.get("uses", "")).endswith("/pulumi-up.yml"):
            continue
        given = job.get("with") or {}
        runner = str(given.get("runner") or _inputs_default(reusable, "runner"))
        label = str(given.get("runs_on") or _inputs_default(reusable, "runs_on"))
        # pulumi-up.yml must run on the label it is given; a literal there overrides every caller.
        runs_on = label if runs_on_expr.replace(" ", "") == "${{inputs.runs_on}}" else runs_on_expr
        found[str(given.get("stack"))] = WorkflowRunner(str(given.get("stack")), job_id, runner, runs_on)
    return found


# Tests point the rule at other workflows (a broken deploy.yml) through this hook.
RUNNERS_FOR: list = [workflow_runners]


def _violation(resource: str, message: str) -> Violation:
    return Violation(NAME, resource, message)


def _runner_lookup(graph: ApplyGraph) -> tuple[str | None, str | None]:
    """The runner security group and its VPC the stack looked up by tag (cluster.network.vpc deployer)."""
    for token, args, result in graph.evaluation.call_results:
        if token == GET_SECURITY_GROUPS and DEPLOYER_RUNNER_TAG in (args.get("tags") or {}):
            ids, vpcs = list(result.get("ids") or []), list(result.get("vpcIds") or [])
            return (ids[0] if ids else None), (vpcs[0] if vpcs else None)
    return None, None


def _subnet_vpcs(graph: ApplyGraph, subnet_ids: list[Any]) -> set[str]:
    """The VPCs of a cluster's subnets: looked-up ones by their answer, created ones by their input."""
    looked_up = {
        args.get("id"): result.get("vpcId")
        for token, args, result in graph.evaluation.call_results
        if token == GET_SUBNET
    }
    created = {mock_id(SUBNET, r.name): r.inputs.get("vpcId") for r in graph.of_type(SUBNET)}
    return {str(looked_up.get(s) or created.get(s) or f"(unknown VPC of {s})") for s in subnet_ids}


def _codebuild_path(graph: ApplyGraph, cluster: RecordedResource) -> Iterable[Violation]:
    vpc = cluster.inputs.get("vpcConfig") or {}
    where = describe(cluster)
    if not vpc.get("endpointPrivateAccess", False):
        yield _violation(
            where, "the runner is in a VPC, but the cluster's private endpoint is off (endpointPrivateAccess)"
        )
    runner_sg, runner_vpc = _runner_lookup(graph)
    if runner_sg is None:
        yield _violation(
            where,
            "the workflow runs `pulumi up` on the CodeBuild runner, but the stack does not use its VPC: set "
            "cluster.network.vpc: deployer (docs/deployer.md)",
        )
        return
    cluster_vpcs = _subnet_vpcs(graph, list(vpc.get("subnetIds") or []))
    if cluster_vpcs != {runner_vpc}:
        yield _violation(
            where,
            f"the cluster's subnets are in {', '.join(sorted(cluster_vpcs))}, the runner in {runner_vpc}; the "
            "private endpoint answers only inside the cluster's VPC",
        )
    cluster_groups = {MOCK_CLUSTER_SG, *(vpc.get("securityGroupIds") or [])}
    admitting = [
        r
        for r in graph.of_type(INGRESS_RULE)
        if r.inputs.get("referencedSecurityGroupId") == runner_sg
        and r.inputs.get("securityGroupId") in cluster_groups
        and str(r.inputs.get("ipProtocol")) in ("tcp", "6", "-1")
        and (
            r.inputs.get("ipProtocol") == "-1" or r.inputs.get("fromPort", 0) <= API_PORT <= r.inputs.get("toPort", -1)
        )
    ]
    if not admitting:
        yield _violation(
            where,
            f"no ingress rule on the cluster's security group admits the runner's group {runner_sg} on TCP {API_PORT}; "
            "every Kubernetes call from the runner times out",
        )
    for provider in graph.of_type(K8S_PROVIDER):
        if admitting and not any(graph.waits_for(provider, r) for r in admitting):
            yield _violation(
                describe(provider),
                f"the Kubernetes provider does not wait for the ingress rule that admits the runner on {API_PORT}",
            )
    access = cluster.inputs.get("accessConfig") or {}
    if not access.get("bootstrapClusterCreatorAdminPermissions", True) and not graph.of_type(ACCESS_ENTRY):
        yield _violation(
            where,
            "the runner's role creates the cluster without bootstrap admin permissions and holds no access entry; "
            "the Kubernetes provider is refused",
        )


def _github_hosted_eks(cluster: RecordedResource) -> Iterable[Violation]:
    vpc = cluster.inputs.get("vpcConfig") or {}
    where = describe(cluster)
    if not vpc.get("endpointPublicAccess", True):
        yield _violation(
            where,
            "the API endpoint is private only and the workflow runs `pulumi up` on a GitHub-hosted runner, which is "
            "outside the VPC: the first Kubernetes call times out; run it on the CodeBuild runner (deployer.runner "
            "codebuild, docs/deployer.md)",
        )
        return
    cidrs = list(vpc.get("publicAccessCidrs") or [])
    if cidrs and WORLD not in cidrs:
        yield _violation(
            where,
            f"the public endpoint admits only {', '.join(cidrs)}; GitHub-hosted runners have no addresses to list, "
            "so the workflow's runner is refused",
        )


def _github_hosted_gke(cluster: RecordedResource) -> Iterable[Violation]:
    inputs = cluster.inputs
    dns = ((inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig")) or {}
    if dns.get("allowExternalTraffic"):
        return  # the DNS-based endpoint, authorized by IAM, answers from anywhere
    where = describe(cluster)
    if (inputs.get("privateClusterConfig") or {}).get("enablePrivateEndpoint"):
        yield _violation(
            where,
            "the control plane has only its private endpoint (and no DNS endpoint open to external traffic); a "
            "runner outside the VPC network cannot reach it",
        )
        return
    networks = inputs.get("masterAuthorizedNetworksConfig")
    if networks is not None:
        blocks = [b.get("cidrBlock") for b in networks.get("cidrBlocks") or []]
        if WORLD not in blocks:
            yield _violation(
                where,
                f"master authorized networks admit only {', '.join(map(str, blocks)) or 'no address'}; GitHub-hosted "
                "runners have no addresses to list",
            )


@rule(NAME, kind="environment")
def deployer_reaches_cluster_endpoint(graph: ApplyGraph) -> Iterable[Violation]:
    evaluation = graph.evaluation
    declared = evaluation.outputs.get("deployer")
    stack = evaluation.stack
    runners = RUNNERS_FOR[0]()
    label = evaluation.outputs.get("runnerLabel")
    if label is not None:
        # A deployer stack calls only AWS APIs, from anywhere but the runner it builds: a job
        # waiting for that runner never starts while the runner does not exist.
        own = runners.get(stack)
        if own is not None and own.runs_on == label:
            yield _violation(
                f"deploy.yml job {own.job}", f"runs `pulumi up` of {stack} on the runner {stack} itself builds"
            )
        return
    if not isinstance(declared, dict):
        return
    workflow = runners.get(stack)
    if workflow is None:
        yield _violation(f"stack {stack}", "no job of .github/workflows/deploy.yml runs `pulumi up` of this stack")
        return
    job = f"deploy.yml job {workflow.job}"
    if workflow.runner != declared.get("runner"):
        yield _violation(
            job,
            f"runs `pulumi up` of {stack} on a {workflow.runner} runner; Pulumi.{stack}.yaml says deployer.runner "
            f"{declared.get('runner')}",
        )
    if declared.get("runner") in ("codebuild", "github-hosted") and workflow.runs_on != declared.get("runsOn"):
        yield _violation(
            job, f"runs on {workflow.runs_on!r}; the stack's runner takes jobs labelled {declared.get('runsOn')!r}"
        )
    for cluster in graph.of_type(EKS_CLUSTER):
        if workflow.runner == "github-hosted":
            yield from _github_hosted_eks(cluster)
        elif workflow.runner == "codebuild":
            yield from _codebuild_path(graph, cluster)
    for cluster in graph.of_type(GKE_CLUSTER):
        if workflow.runner == "codebuild":
            yield _violation(
                describe(cluster), "a CodeBuild runner runs in an AWS VPC; deploy a GKE stack from another"
            )
        elif workflow.runner == "github-hosted":
            yield from _github_hosted_gke(cluster)
