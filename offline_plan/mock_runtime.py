"""Evaluate the real Pulumi program with the SDK's mock runtime: no CLI, no cloud, no cluster.

The offline plan and the tests both go through here, so what they inspect is exactly what the
program asks the engine to create. Mocks echo inputs back as outputs (as `pulumi preview` shows
unknown-until-created values) and fill in the few outputs the program reads from a cloud resource
(a cluster endpoint, a node role ARN) with recognisable placeholders.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import re
import runpy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.sync_await import _sync_await

from common.untrusted import MAX_STACK_FILE_BYTES, InputLimitError, excerpt, read_text_file
from components.cluster.aws.network import DEPLOYER_RUNNER_TAG, DEPLOYER_TAG
from safe_yaml import load_one
from safe_yaml.bounded import json_value_problems
from stack_config import PROJECT, SECRET_KEYS, ConfigError
from stack_config.loader import ROTATION_SECRET_KEYS

# Values the aliases of a stack file may stand for (a stack file is hand-written and small; an
# alias bomb must stop long before validation copies it).
MAX_STACK_ALIAS_VALUES = 10_000

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "__main__.py"

# The SDK sends register calls from a thread pool, so resources that register concurrently are
# recorded in whatever order the threads happen to run: a plan that depends on that order differs
# from run to run on a loaded machine. Set to an integer, this variable delays each call by up to a
# millisecond drawn from a generator seeded with it, shuffling that order on purpose;
# tests/offline_plan/test_plan_determinism.py runs the plan under two seeds and compares the files.
REGISTRATION_JITTER_ENV = "LLM_SERVING_PLAN_REGISTRATION_JITTER"


# How the SDK marks a secret value on the wire; the mock monitor keeps the marker in the inputs.
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REDACTED = "<secret>"


def is_secret_value(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SECRET_SIG_KEY) == _SECRET_SIG


def redact_secrets(value: Any) -> Any:
    """A copy of `value` with every secret replaced by a marker: what plan files may show."""
    if is_secret_value(value):
        inner = value.get("value")
        # A whole map made secret (a Secret's stringData) keeps its keys, so it still validates.
        if isinstance(inner, dict):
            return dict.fromkeys(inner, REDACTED)
        return REDACTED
    if isinstance(value, dict):
        return {k: redact_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return value


def whole_numbers(value: Any) -> Any:
    """A copy with integral floats as ints: the wire format carries every number as a double, so
    `replicas: 1` would otherwise come back as `1.0`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def secret_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of the secret values inside `value` (for tests that a token stayed secret)."""
    if is_secret_value(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in secret_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in secret_paths(v, f"{path}[{i}]")]
    return []


@dataclass
class RecordedResource:
    type: str
    name: str
    inputs: dict[str, Any]
    provider: str | None
    custom: bool | None
    urn: str = ""
    parent_urn: str = ""
    # URNs this resource explicitly depends on (depends_on): the engine creates those first.
    dependencies: tuple[str, ...] = ()
    # The resource's customTimeouts option ({"create": "1200s", ...}; empty when unset).
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    # For a read of an existing object (`Resource.get`): the id it was read by; None for a resource
    # the program creates.
    read_id: str | None = None
    # Lifecycle options the engine acts on in later updates and on destroy: retainOnDelete (destroy
    # drops it from state and leaves the cloud resource), replaceOnChanges, ignoreChanges.
    retain_on_delete: bool = False
    replace_on_changes: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()

    @property
    def is_kubernetes_object(self) -> bool:
        # Providers, Helm releases and YAML groups are not objects the API server stores.
        return (
            self.type.startswith("kubernetes:")
            and not self.type.startswith(("kubernetes:helm.sh", "kubernetes:yaml", "kubernetes:kustomize"))
            and self.type != "pulumi:providers:kubernetes"
            and "kind" in self.inputs
        )


# Outputs a real provider computes that the program reads back, merged into the echoed inputs.
# Placeholders say what they are.
MOCK_SUBNETS = ["subnet-mock-a", "subnet-mock-b", "subnet-mock-c"]
MOCK_CLUSTER_SG = "sg-mock-cluster"

# --- The mock AWS account: what the cloud layer's look-ups find -------------------------------
# Zones of the mock region (name suffix, zone id). The zone ids of us-east-1 include use1-az3,
# where EKS refuses cluster subnets, as in many real accounts.
MOCK_ZONES = (("a", "az1"), ("b", "az2"), ("c", "az4"), ("d", "az6"), ("e", "az3"), ("f", "az5"))
# GPU instance types with EFA are offered in two zones only, neither of them the first: a program
# that takes the first zone (or the first sorted subnet) for them picks a zone without the type.
MOCK_SCARCE_INSTANCE_TYPES = ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge")
MOCK_SCARCE_ZONES = ("b", "d")
# Subnets the look-ups know: id -> (zone suffix, public). The default VPC's default subnets are
# public; an existing VPC ("vpc-mock-existing") has private subnets in zones a-d behind NAT; the
# existing cluster (`getCluster`) lists the public three and the private a-c.
MOCK_PRIVATE_SUBNETS = [f"subnet-0000000000000{zone * 4}" for zone in "abcd"]
MOCK_EXISTING_VPC = "vpc-mock-existing"
# A deployer stack's VPC (cluster.network.vpc deployer), found by its tag: private subnets behind NAT
# and public ones in zones a-d, and the CodeBuild runner's security group. Placeholders: a real
# preview finds what `pulumi up -s <stack>-deployer` created.
MOCK_DEPLOYER_VPC = "vpc-mock-deployer"
MOCK_DEPLOYER_PRIVATE_SUBNETS = [f"subnet-0000000000001{zone * 4}" for zone in "abcd"]
MOCK_DEPLOYER_PUBLIC_SUBNETS = [f"subnet-0000000000002{zone * 4}" for zone in "abcd"]
MOCK_DEPLOYER_RUNNER_SG = "sg-mock-deployer-runner"
_MOCK_SUBNET_TABLE = {
    **{sid: (sid[-1], True, "vpc-mock-default") for sid in MOCK_SUBNETS},
    **{sid: (sid[-1], False, MOCK_EXISTING_VPC) for sid in MOCK_PRIVATE_SUBNETS},
    **{sid: (sid[-1], False, MOCK_DEPLOYER_VPC) for sid in MOCK_DEPLOYER_PRIVATE_SUBNETS},
    **{sid: (sid[-1], True, MOCK_DEPLOYER_VPC) for sid in MOCK_DEPLOYER_PUBLIC_SUBNETS},
}
_PUBLIC_TABLE, _PRIVATE_TABLE, _MAIN_TABLE = "rtb-mock-public", "rtb-mock-private", "rtb-mock-main"


def _zone_id(region: str, suffix: str) -> str:
    zone_id = dict(MOCK_ZONES)[suffix]
    prefix = "use1" if region == "us-east-1" else region.replace("-", "")
    return f"{prefix}-{zone_id}"


def _availability_zones(args: dict) -> dict:
    region = args.get("region") or "us-east-1"
    return {
        "id": region,
        "names": [f"{region}{s}" for s, _ in MOCK_ZONES],
        "zoneIds": [_zone_id(region, s) for s, _ in MOCK_ZONES],
        "groupNames": [region] * len(MOCK_ZONES),
    }


def _instance_type_offerings(args: dict) -> dict:
    region = args.get("region") or "us-east-1"
    types = [v for f in args.get("filters", []) if f["name"] == "instance-type" for v in f["values"]]
    scarce = any(t in MOCK_SCARCE_INSTANCE_TYPES for t in types)
    suffixes = MOCK_SCARCE_ZONES if scarce else [s for s, _ in MOCK_ZONES]
    zones = [f"{region}{s}" for s in suffixes]
    return {
        "id": region,
        "instanceTypes": types * len(zones),
        "locations": zones,
        "locationTypes": ["availability-zone"] * len(zones),
    }


def _subnet(args: dict) -> dict:
    region = args.get("region") or "us-east-1"
    known = _MOCK_SUBNET_TABLE.get(args.get("id", ""))
    if known is None:
        return {}
    suffix, public, vpc = known
    return {
        "availabilityZone": f"{region}{suffix}",
        "availabilityZoneId": _zone_id(region, suffix),
        "vpcId": vpc,
        "mapPublicIpOnLaunch": public,
    }


def _vpcs(args: dict) -> dict:
    """The deployer stack's VPC for a look-up by its tag; no other VPC is tagged in the mock account."""
    tagged = DEPLOYER_TAG in (args.get("tags") or {})
    return {"id": "mock", "ids": [MOCK_DEPLOYER_VPC] if tagged else []}


def _subnets(args: dict) -> dict:
    """The default VPC's default subnets, or a deployer VPC's private / public ones by their role tag."""
    filters = {f["name"]: f["values"] for f in args.get("filters", [])}
    if filters.get("vpc-id") == [MOCK_DEPLOYER_VPC]:
        if "tag:kubernetes.io/role/internal-elb" in filters:
            return {"id": "mock", "ids": MOCK_DEPLOYER_PRIVATE_SUBNETS}
        if "tag:kubernetes.io/role/elb" in filters:
            return {"id": "mock", "ids": MOCK_DEPLOYER_PUBLIC_SUBNETS}
        return {"id": "mock", "ids": []}
    return {"id": "mock", "ids": MOCK_SUBNETS}


def _security_groups(args: dict) -> dict:
    filters = {f["name"]: f["values"] for f in args.get("filters", [])}
    tagged = DEPLOYER_RUNNER_TAG in (args.get("tags") or {})
    found = tagged and filters.get("vpc-id", [MOCK_DEPLOYER_VPC]) == [MOCK_DEPLOYER_VPC]
    return {
        "id": "mock",
        "ids": [MOCK_DEPLOYER_RUNNER_SG] if found else [],
        "vpcIds": [MOCK_DEPLOYER_VPC] if found else [],
        "arns": [],
    }


def _route_tables(args: dict) -> dict:
    filters = {f["name"]: f["values"] for f in args.get("filters", [])}
    if "association.subnet-id" in filters:
        known = _MOCK_SUBNET_TABLE.get(filters["association.subnet-id"][0])
        # The default VPC's subnets have no table of their own: they use the main one.
        ids = [] if known is None or known[1] else [_PRIVATE_TABLE]
        return {"id": "mock", "ids": ids}
    return {"id": "mock", "ids": [_MAIN_TABLE]}


_ROUTE_FIELDS = (
    "carrierGatewayId",
    "cidrBlock",
    "coreNetworkArn",
    "destinationPrefixListId",
    "egressOnlyGatewayId",
    "gatewayId",
    "instanceId",
    "ipv6CidrBlock",
    "localGatewayId",
    "natGatewayId",
    "networkInterfaceId",
    "odbNetworkArn",
    "transitGatewayId",
    "vpcEndpointId",
    "vpcPeeringConnectionId",
)


def _route_table(args: dict) -> dict:
    table = args.get("routeTableId", "")
    target = {"natGatewayId": "nat-mock"} if table == _PRIVATE_TABLE else {"gatewayId": "igw-mock"}
    route = {**dict.fromkeys(_ROUTE_FIELDS, ""), "cidrBlock": "0.0.0.0/0", **target}
    return {"routeTableId": table, "routes": [route], "associations": []}


_COMPUTED_OUTPUTS: dict[str, dict[str, Any]] = {
    "aws:eks/cluster:Cluster": {
        "endpoint": "https://mock-eks-endpoint.example",
        "certificateAuthority": {"data": "bW9jay1jYQ=="},
        "identities": [{"oidcs": [{"issuer": "https://oidc.eks.mock-region.amazonaws.com/id/MOCK"}]}],
        "vpcConfig": {"clusterSecurityGroupId": MOCK_CLUSTER_SG, "vpcId": "vpc-mock-default"},
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1},
    "gcp:container/cluster:Cluster": {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "bW9jay1jYQ=="},
        # Output only: GKE names the DNS-based endpoint `<uid>.<region>.gke.goog`.
        "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {"endpoint": "gke-mock0123456789.mock-region.gke.goog"}},
    },
    "aws:s3/bucket:Bucket": {"arn": "arn:aws:s3:::mock-bucket"},
    "aws:sqs/queue:Queue": {"url": "https://sqs.mock-region.amazonaws.com/123456789012/mock-queue"},
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": {"registryId": "123456789012"},
}

# Created EC2 resources get ids in EC2's own form (`subnet-...`, `sg-...`), so objects that
# validate ids by pattern (Karpenter's EC2NodeClass selector terms) see what they would in a preview.
_EC2_ID_PREFIXES = {
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/placementGroup:PlacementGroup": "pg",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
}


def mock_id(type_token: str, name: str) -> str:
    """The id the mock gives a created resource: `<name>-id`, or `<prefix>-mock-<name>` for EC2."""
    prefix = _EC2_ID_PREFIXES.get(type_token)
    return f"{prefix}-mock-{name}" if prefix else f"{name}-id"


# Answers to provider look-ups (data sources) the program makes: a mapping merged over the echoed
# arguments, or a function of the arguments.
_CALL_RESULTS: dict[str, Any] = {
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": "123456789012",
        "arn": "arn:aws:iam::123456789012:user/mock",
        "userId": "mock",
    },
    "aws:index/getRegion:getRegion": {"name": "us-east-1", "region": "us-east-1"},
    "aws:index/getPartition:getPartition": {"partition": "aws", "dnsSuffix": "amazonaws.com"},
    "aws:index/getAvailabilityZones:getAvailabilityZones": _availability_zones,
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _instance_type_offerings,
    "aws:ec2/getSubnet:getSubnet": _subnet,
    "aws:ec2/getRouteTables:getRouteTables": _route_tables,
    "aws:ec2/getRouteTable:getRouteTable": _route_table,
    "aws:ec2/getVpc:getVpc": {"id": "vpc-mock-default", "default": True, "cidrBlock": "172.31.0.0/16"},
    "aws:ec2/getSubnets:getSubnets": _subnets,
    "aws:ec2/getVpcs:getVpcs": _vpcs,
    "aws:ec2/getSecurityGroups:getSecurityGroups": _security_groups,
    "aws:eks/getCluster:getCluster": {
        "endpoint": "https://mock-existing-eks-endpoint.example",
        "certificateAuthorities": [{"data": "bW9jay1leGlzdGluZy1jYQ=="}],
        "version": "1.33",
        "vpcConfig": {
            "subnetIds": MOCK_SUBNETS + MOCK_PRIVATE_SUBNETS[:3],
            "vpcId": MOCK_EXISTING_VPC,
            "clusterSecurityGroupId": MOCK_CLUSTER_SG,
            "securityGroupIds": [],
            "publicAccessCidrs": [],
            "endpointPrivateAccess": True,
            "endpointPublicAccess": True,
            "controlPlaneEgressMode": "",
        },
    },
    "gcp:container/getCluster:getCluster": {
        "endpoint": "203.0.113.20",
        "masterAuths": [
            {
                "clusterCaCertificate": "bW9jay1leGlzdGluZy1jYQ==",
                "clientCertificate": "",
                "clientKey": "",
                "clientCertificateConfigs": [],
            }
        ],
    },
    "gcp:organizations/getProject:getProject": {"projectId": "mock-project", "number": "123456789"},
    "gcp:organizations/getClientConfig:getClientConfig": {"project": "mock-project", "region": "us-central1"},
}


def _merge(base: dict, extra: dict) -> dict:
    """`base` with `extra`'s keys added where missing, nested mappings merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out.setdefault(key, copy.deepcopy(value))
    return out


CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


class MissingResourceError(Exception):
    """What the engine reports for a read of an object that does not exist, as the CLI prints it.

    pulumi/pulumi pkg/resource/deploy/step.go (ReadStep.Apply): `resource '<id>' does not exist`;
    in a preview the diagnostic is prefixed "Preview failed: " (sdk/go/common/diag/errors.go,
    GetPreviewFailedError) and shown under the resource's "<type> (<name>):" header
    (pkg/backend/display/progress.go, resourceHeader).
    """

    def __init__(self, type_: str, name: str, resource_id: str):
        self.type, self.name, self.resource_id = type_, name, resource_id
        super().__init__(f"  {type_} ({name}):\n    error: Preview failed: resource '{resource_id}' does not exist")


_JITTER_LOCK = threading.Lock()
_JITTER: list[random.Random] = []


def _jitter() -> None:
    """Up to 1 ms of delay when REGISTRATION_JITTER_ENV is set (see there); nothing otherwise."""
    seed = os.environ.get(REGISTRATION_JITTER_ENV)
    if not seed:
        return
    with _JITTER_LOCK:
        if not _JITTER:
            _JITTER.append(random.Random(seed))
        delay = _JITTER[0].random() / 1000
    time.sleep(delay)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also noting each resource's URN, parent, dependencies and options."""

    mocks: RecordingMocks  # _run builds it with the recording mocks, whose per-thread notes it fills

    def _note(self, request, read: bool) -> None:
        # The SDK registers resources from a thread pool; these travel per thread.
        self.mocks.registering.parent = request.parent
        self.mocks.registering.urn = self.make_urn(request.parent, request.type, request.name)
        self.mocks.registering.dependencies = tuple(request.dependencies)
        self.mocks.registering.read = read
        self.mocks.registering.retain_on_delete = bool(getattr(request, "retainOnDelete", False))
        self.mocks.registering.replace_on_changes = tuple(getattr(request, "replaceOnChanges", ()) or ())
        self.mocks.registering.ignore_changes = tuple(getattr(request, "ignoreChanges", ()) or ())
        timeouts = getattr(request, "customTimeouts", None)
        self.mocks.registering.custom_timeouts = (
            {k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)}
            if timeouts is not None
            else {}
        )

    def RegisterResource(self, request):
        _jitter()
        self._note(request, read=False)
        return super().RegisterResource(request)

    def ReadResource(self, request):
        self._note(request, read=True)
        return super().ReadResource(request)


class RecordingMocks(pulumi.runtime.Mocks):
    """Echoing mocks that record every resource.

    `cluster_crds`: the CRD names an existing cluster stand-in has. None (the offline plan, which
    cannot see a cluster) answers every CRD read as present; a set makes a read of any other CRD
    fail as the engine fails it, so tests can observe a missing add-on.
    """

    def __init__(self, cluster_crds: set[str] | None = None) -> None:
        self.resources: list[RecordedResource] = []
        self.calls: list[tuple[str, dict]] = []
        # The same look-ups with what they answered: rules about looked-up things read these.
        self.call_results: list[tuple[str, dict, dict]] = []
        self.registering = threading.local()
        self.cluster_crds = cluster_crds

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        read = getattr(self.registering, "read", False)
        self.resources.append(
            RecordedResource(
                args.typ,
                args.name,
                dict(args.inputs),
                args.provider,
                args.custom,
                urn=getattr(self.registering, "urn", ""),
                parent_urn=getattr(self.registering, "parent", ""),
                dependencies=getattr(self.registering, "dependencies", ()),
                custom_timeouts=dict(getattr(self.registering, "custom_timeouts", {}) or {}),
                read_id=args.resource_id if read else None,
                retain_on_delete=getattr(self.registering, "retain_on_delete", False),
                replace_on_changes=getattr(self.registering, "replace_on_changes", ()),
                ignore_changes=getattr(self.registering, "ignore_changes", ()),
            )
        )
        if (
            read
            and args.typ == CRD_TYPE
            and self.cluster_crds is not None
            and args.resource_id not in self.cluster_crds
        ):
            assert args.resource_id is not None  # a read always names the id it reads
            raise MissingResourceError(args.typ, args.name, args.resource_id)
        if read:
            return args.resource_id, {"metadata": {"name": args.resource_id}}
        outputs = dict(args.inputs)
        resource_id = mock_id(args.typ, args.name)
        outputs.setdefault("name", args.inputs.get("name", args.name))
        outputs.setdefault("arn", f"arn:aws:mock:::{args.name}")
        outputs.setdefault("id", resource_id)
        if args.typ == "gcp:serviceaccount/account:Account":
            # One email per account, so a writer and a reader can be told apart.
            outputs["email"] = f"{args.inputs.get('accountId', args.name)}@mock-project.iam.gserviceaccount.com"
            outputs["name"] = f"projects/mock-project/serviceAccounts/{outputs['email']}"
        return resource_id, _merge(outputs, _COMPUTED_OUTPUTS.get(args.typ, {}))

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {"json": json.dumps(args.args)}
        # The mock monitor reads a bare dict as the result (a tuple's second item must be a list).
        answer = _CALL_RESULTS.get(args.token, {})
        if callable(answer):
            answer = answer(dict(args.args))
        result = _merge(dict(args.args), answer)
        self.call_results.append((args.token, dict(args.args), result))
        return result


@dataclass
class Evaluation:
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    # Provider look-ups the program made: (token, args), and with their answers (token, args, result).
    calls: list[tuple[str, dict]] = field(default_factory=list)
    call_results: list[tuple[str, dict, dict]] = field(default_factory=list)
    # Secret keys the stack file lacks that the evaluation stood in for (see evaluate_stack).
    assumed_secrets: list[str] = field(default_factory=list)
    # The config the program ran with (CLI form: "llm-serving:key" -> string) and its secret keys,
    # and the program file: what a second evaluation with one change needs (update_diff.py).
    config: dict[str, str] = field(default_factory=dict)
    secret_keys: list[str] = field(default_factory=list)
    program: Path | None = None

    def tree(self) -> list[tuple[int, str, str]]:
        """(depth, type, name) for every resource below the stack, parents before children."""
        children: dict[str, list[RecordedResource]] = {}
        urns = {r.urn for r in self.resources}
        for r in self.resources:
            parent = r.parent_urn if r.parent_urn in urns else ""
            children.setdefault(parent, []).append(r)
        rows: list[tuple[int, str, str]] = []

        def walk(parent: str, depth: int) -> None:
            for child in sorted(children.get(parent, []), key=lambda r: (r.type, r.name)):
                rows.append((depth, child.type, child.name))
                walk(child.urn, depth + 1)

        walk("", 0)
        return rows

    def of_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    @property
    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the program asks for, secrets redacted (as a plan shows them).

        In (kind, namespace, name) order: resources register as their inputs resolve, which varies
        from run to run, and a plan must read the same for the same program.
        """
        objects = [whole_numbers(redact_secrets(r.inputs)) for r in self.resources if r.is_kubernetes_object]
        return sorted(objects, key=_object_order)


def _object_order(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("kind", "")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        json.dumps(obj, sort_keys=True, default=str),
    )


# Pulumi stack names: letters, digits, '-', '_' and '.', at most 100 characters (the CLI's own rule
# for `pulumi stack init`); anything else cannot name a Pulumi.<stack>.yaml beside the program.
STACK_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_file_config(stack: str, project_dir: Path = ROOT) -> tuple[dict[str, str], list[str]]:
    """Read Pulumi.<stack>.yaml the way the CLI hands config to a program.

    Values become strings (structured ones as JSON). Encrypted values (`secure: ...`) cannot be
    decrypted without the CLI, so they are replaced by a marked placeholder and listed as secret:
    the program sees a secret, never its value.

    The file is untrusted input: read within limits (a regular file of at most
    MAX_STACK_FILE_BYTES, UTF-8, YAML through safe_yaml: libyaml, bounded nesting and aliases, a key
    given twice refused as the CLI refuses it), and only plain data goes on (string keys, finite
    numbers). Every problem is a ConfigError line naming the file and the key.
    """
    if not isinstance(stack, str) or not STACK_NAME_RE.fullmatch(stack) or stack in (".", ".."):
        raise ConfigError(
            [f"stack name {excerpt(stack)} is not a Pulumi stack name; use letters, digits, '-', '_' or '.' (e.g. dev)"]
        )
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise ConfigError([f"no stack file {path.name}; stacks here: {', '.join(stacks) or 'none'}"])
    try:
        text = read_text_file(path, MAX_STACK_FILE_BYTES, path.name)
        doc = load_one(text, path.name, unique_keys=True, max_alias_values=MAX_STACK_ALIAS_VALUES)
    except InputLimitError as err:
        raise ConfigError([str(err)]) from None
    doc = doc or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise ConfigError([f"{path.name}: the top level must be a mapping with a `config:` mapping of keys"])
    entries = doc.get("config") or {}
    problems = [
        f"{path.name}: {where.removeprefix(PROJECT + ':')}: {problem}"
        for where, problem in json_value_problems(entries, plain_only=True)
    ]
    if problems:
        raise ConfigError(problems)
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    spelled: dict[str, str] = {}
    for key, value in entries.items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        short = full_key.removeprefix(f"{PROJECT}:")
        if full_key in spelled:
            # `hfToken` and `llm-serving:hfToken` are one key to the CLI; keeping either silently
            # would hide the other (a plain-text token beside its `secure:` twin, say).
            problems.append(
                f"{path.name}: {excerpt(short)}: set twice, as {excerpt(spelled[full_key])} and "
                f"{excerpt(key)}; keep one (secrets only as `secure:`, set with "
                f"`pulumi config set --secret {short}`)"
            )
            continue
        spelled[full_key] = key
        if isinstance(value, dict) and "secure" in value:
            if set(value) != {"secure"} or not isinstance(value["secure"], str):
                problems.append(
                    f"{path.name}: {excerpt(short)}: a `secure:` entry holds only the ciphertext the CLI "
                    "wrote; remove the other keys (never put the plain value next to it)"
                )
                continue
            config[full_key] = f"<secret {full_key} (encrypted in {path.name})>"
            secret_keys.append(full_key)
        elif isinstance(value, str):
            config[full_key] = value
        else:
            config[full_key] = json.dumps(value)
    if problems:
        raise ConfigError(problems)
    return config, secret_keys


def run_in_mocks(
    fn: Callable[[], None],
    stack: str = "test",
    config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
    cluster_crds: set[str] | None = None,
) -> Evaluation:
    """Run `fn` (which creates resources, e.g. one component) under mocks; for component tests."""
    return _run(fn, stack, config or {}, secret_keys, cluster_crds=cluster_crds)


def evaluate(
    stack: str,
    config: dict[str, str],
    secret_keys: list[str] | None = None,
    program: Path = PROGRAM,
    raise_errors: bool = True,
    cluster_crds: set[str] | None = None,
) -> Evaluation:
    """Run the program once under mocks with the given config and return what it registered."""
    if str(program.parent) not in sys.path:
        sys.path.insert(0, str(program.parent))
    evaluation = _run(
        lambda: runpy.run_path(str(program), run_name="__main__"),
        stack,
        config,
        secret_keys,
        raise_errors,
        cluster_crds,
    )
    evaluation.program = program
    return evaluation


def _run(
    body: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: list[str] | None,
    raise_errors: bool = True,
    cluster_crds: set[str] | None = None,
) -> Evaluation:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = RecordingMocks(cluster_crds)
    pulumi.runtime.set_all_config(dict(config), list(secret_keys or []))
    # The SDK keeps the root Stack in a context variable and set_mocks makes a new one only when it
    # is unset (pulumi/runtime/mocks.py set_mocks), so without this every evaluation in a process
    # would export into the first one's Stack: a served stack evaluated after a deployer stack
    # would carry its `runnerLabel` output and be planned as a deployer stack.
    pulumi_settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    root = pulumi.runtime.get_root_resource()
    evaluation = Evaluation(
        stack=stack,
        resources=mocks.resources,
        calls=mocks.calls,
        call_results=mocks.call_results,
        config=dict(config),
        secret_keys=list(secret_keys or []),
    )
    try:
        _sync_await(pulumi.runtime.stack.run_pulumi_func(body))
    except BaseException as err:
        evaluation.error = err
        if raise_errors:
            raise
    finally:
        evaluation.outputs = _stack_outputs(root)
        _settle(loop)
        _forget_unfinished_work()
        loop.close()
        asyncio.set_event_loop(None)
    return evaluation


def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """After a program failed mid-way: cancel what it left running and wait for the monitor calls
    still in the loop's thread pool, so nothing of this run keeps executing beside the next one."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_default_executor())


def _forget_unfinished_work() -> None:
    """Drop the SDK's process-wide record of outstanding outputs and RPCs.

    A program that fails mid-way (a missing CRD read, a config error in a component) leaves tasks of
    its event loop in these sets; the next evaluation in the same process would wait on them and
    fail with "Event loop is closed".
    """
    from pulumi.runtime.settings import SETTINGS, _get_rpc_manager

    with SETTINGS.lock:
        SETTINGS.outputs.clear()
    _get_rpc_manager().clear()


def _stack_outputs(root) -> dict[str, Any]:
    """Resolve what the program exported (pulumi.export) to plain values."""
    outputs = getattr(root, "outputs", None) or {}
    resolved: dict[str, Any] = {}
    for key, value in outputs.items():
        try:
            resolved[key] = _sync_await(pulumi.Output.from_input(value).future())
        except Exception:
            resolved[key] = "<unknown>"
    return resolved


def evaluate_stack(
    stack: str,
    project_dir: Path = ROOT,
    overrides: dict[str, Any] | None = None,
    assume_secrets: bool = True,
    cluster_crds: set[str] | None = None,
    raise_errors: bool = True,
) -> Evaluation:
    """Evaluate a stack from its stack file, optionally overriding config keys (tests).

    Secrets are set with `pulumi config set --secret` on the machine that deploys, so a committed
    stack file usually lacks them. With `assume_secrets`, each missing one is stood in for by a
    marked secret placeholder and listed in `Evaluation.assumed_secrets`, so the plan can say that
    `pulumi up` will need it. `cluster_crds` stands in for an existing cluster's CRDs (see
    RecordingMocks).
    """
    config, secret_keys = stack_file_config(stack, project_dir)
    for key, value in (overrides or {}).items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        config[full_key] = value if isinstance(value, str) else json.dumps(value)
    assumed = []
    # A deployer stack (role: deployer) reads no secrets.
    if assume_secrets and config.get(f"{PROJECT}:role") != "deployer":
        for key in SECRET_KEYS:
            full_key = f"{PROJECT}:{key}"
            if full_key not in config and key not in ROTATION_SECRET_KEYS:
                config[full_key] = f"<secret {full_key} (not set in Pulumi.{stack}.yaml)>"
                secret_keys.append(full_key)
                assumed.append(key)
    evaluation = evaluate(
        stack,
        config,
        secret_keys,
        program=project_dir / "__main__.py",
        raise_errors=raise_errors,
        cluster_crds=cluster_crds,
    )
    evaluation.assumed_secrets = assumed
    return evaluation
