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
import re
import runpy
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.sync_await import _sync_await

from common.untrusted import MAX_STACK_FILE_BYTES, InputLimitError, excerpt, read_text_file
from safe_yaml import load_one
from safe_yaml.bounded import json_value_problems
from stack_config import PROJECT, SECRET_KEYS, ConfigError

# Values the aliases of a stack file may stand for (a stack file is hand-written and small; an
# alias bomb must stop long before validation copies it).
MAX_STACK_ALIAS_VALUES = 10_000

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "__main__.py"


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
            return {k: REDACTED for k in inner}
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
    },
    "aws:s3/bucket:Bucket": {"arn": "arn:aws:s3:::mock-bucket"},
}

# Answers to provider look-ups (data sources) the program makes.
_CALL_RESULTS: dict[str, dict[str, Any]] = {
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/mock", "userId": "mock"},
    "aws:index/getRegion:getRegion": {"name": "us-east-1", "region": "us-east-1"},
    "aws:index/getPartition:getPartition": {"partition": "aws", "dnsSuffix": "amazonaws.com"},
    "aws:ec2/getVpc:getVpc": {"id": "vpc-mock-default", "default": True, "cidrBlock": "172.31.0.0/16"},
    "aws:ec2/getSubnets:getSubnets": {"id": "us-east-1", "ids": MOCK_SUBNETS},
    "aws:eks/getCluster:getCluster": {
        "endpoint": "https://mock-existing-eks-endpoint.example",
        "certificateAuthorities": [{"data": "bW9jay1leGlzdGluZy1jYQ=="}],
        "vpcConfig": {
            "subnetIds": MOCK_SUBNETS, "vpcId": "vpc-mock-existing", "clusterSecurityGroupId": MOCK_CLUSTER_SG,
            "securityGroupIds": [], "publicAccessCidrs": [], "endpointPrivateAccess": True,
            "endpointPublicAccess": True, "controlPlaneEgressMode": "",
        },
    },
    "gcp:container/getCluster:getCluster": {
        "endpoint": "203.0.113.20",
        "masterAuths": [{"clusterCaCertificate": "bW9jay1leGlzdGluZy1jYQ==", "clientCertificate": "",
                         "clientKey": "", "clientCertificateConfigs": []}],
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


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also noting each resource's URN and parent (for the resource tree)."""

    def RegisterResource(self, request):
        # The SDK registers resources from a thread pool; the URN travels per thread.
        self.mocks.registering.parent = request.parent
        self.mocks.registering.urn = self.make_urn(request.parent, request.type, request.name)
        self.mocks.registering.dependencies = tuple(request.dependencies)
        return super().RegisterResource(request)


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[RecordedResource] = []
        self.calls: list[tuple[str, dict]] = []
        self.registering = threading.local()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(
            RecordedResource(
                args.typ, args.name, dict(args.inputs), args.provider, args.custom,
                urn=getattr(self.registering, "urn", ""), parent_urn=getattr(self.registering, "parent", ""),
                dependencies=getattr(self.registering, "dependencies", ()),
            )
        )
        outputs = dict(args.inputs)
        outputs.setdefault("name", args.inputs.get("name", args.name))
        outputs.setdefault("arn", f"arn:aws:mock:::{args.name}")
        outputs.setdefault("id", f"{args.name}-id")
        if args.typ == "gcp:serviceaccount/account:Account":
            # One email per account, so a writer and a reader can be told apart.
            outputs["email"] = f"{args.inputs.get('accountId', args.name)}@mock-project.iam.gserviceaccount.com"
            outputs["name"] = f"projects/mock-project/serviceAccounts/{outputs['email']}"
        return f"{args.name}-id", _merge(outputs, _COMPUTED_OUTPUTS.get(args.typ, {}))

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {"json": json.dumps(args.args)}
        # The mock monitor reads a bare dict as the result (a tuple's second item must be a list).
        return _merge(dict(args.args), _CALL_RESULTS.get(args.token, {}))


@dataclass
class Evaluation:
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    # Provider look-ups the program made: (token, args).
    calls: list[tuple[str, dict]] = field(default_factory=list)
    # Secret keys the stack file lacks that the evaluation stood in for (see evaluate_stack).
    assumed_secrets: list[str] = field(default_factory=list)

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
    return (str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", "")),
            json.dumps(obj, sort_keys=True, default=str))


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
        raise ConfigError([f"stack name {excerpt(stack)} is not a Pulumi stack name; use letters, digits, '-', '_' "
                           "or '.' (e.g. dev)"])
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
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
    problems = [f"{path.name}: {where.removeprefix(PROJECT + ':')}: {problem}"
                for where, problem in json_value_problems(entries, plain_only=True)]
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
            problems.append(f"{path.name}: {excerpt(short)}: set twice, as {excerpt(spelled[full_key])} and "
                            f"{excerpt(key)}; keep one (secrets only as `secure:`, set with "
                            f"`pulumi config set --secret {short}`)")
            continue
        spelled[full_key] = key
        if isinstance(value, dict) and "secure" in value:
            if set(value) != {"secure"} or not isinstance(value["secure"], str):
                problems.append(f"{path.name}: {excerpt(short)}: a `secure:` entry holds only the ciphertext the CLI "
                                "wrote; remove the other keys (never put the plain value next to it)")
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
) -> Evaluation:
    """Run `fn` (which creates resources, e.g. one component) under mocks; for component tests."""
    return _run(lambda: fn(), stack, config or {}, secret_keys)


def evaluate(
    stack: str,
    config: dict[str, str],
    secret_keys: list[str] | None = None,
    program: Path = PROGRAM,
    raise_errors: bool = True,
) -> Evaluation:
    """Run the program once under mocks with the given config and return what it registered."""
    if str(program.parent) not in sys.path:
        sys.path.insert(0, str(program.parent))
    return _run(lambda: runpy.run_path(str(program), run_name="__main__"), stack, config, secret_keys, raise_errors)


def _run(
    body: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: list[str] | None,
    raise_errors: bool = True,
) -> Evaluation:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = RecordingMocks()
    pulumi.runtime.set_all_config(dict(config), list(secret_keys or []))
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack=stack, preview=False, monitor=RecordingMonitor(mocks)
    )
    root = pulumi.runtime.get_root_resource()
    evaluation = Evaluation(stack=stack, resources=mocks.resources, calls=mocks.calls)
    try:
        _sync_await(pulumi.runtime.stack.run_pulumi_func(body))
    except BaseException as err:  # noqa: BLE001 handed back to the caller as data or re-raised
        evaluation.error = err
        if raise_errors:
            raise
    finally:
        evaluation.outputs = _stack_outputs(root)
        loop.close()
        asyncio.set_event_loop(None)
    return evaluation


def _stack_outputs(root) -> dict[str, Any]:
    """Resolve what the program exported (pulumi.export) to plain values."""
    outputs = getattr(root, "outputs", None) or {}
    resolved: dict[str, Any] = {}
    for key, value in outputs.items():
        try:
            resolved[key] = _sync_await(pulumi.Output.from_input(value).future())
        except Exception:  # noqa: BLE001 an unresolvable export is reported as such
            resolved[key] = "<unknown>"
    return resolved


def evaluate_stack(
    stack: str,
    project_dir: Path = ROOT,
    overrides: dict[str, Any] | None = None,
    assume_secrets: bool = True,
) -> Evaluation:
    """Evaluate a stack from its stack file, optionally overriding config keys (tests).

    Secrets are set with `pulumi config set --secret` on the machine that deploys, so a committed
    stack file usually lacks them. With `assume_secrets`, each missing one is stood in for by a
    marked secret placeholder and listed in `Evaluation.assumed_secrets`, so the plan can say that
    `pulumi up` will need it.
    """
    config, secret_keys = stack_file_config(stack, project_dir)
    for key, value in (overrides or {}).items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        config[full_key] = value if isinstance(value, str) else json.dumps(value)
    assumed = []
    if assume_secrets:
        for key in SECRET_KEYS:
            full_key = f"{PROJECT}:{key}"
            if full_key not in config:
                config[full_key] = f"<secret {full_key} (not set in Pulumi.{stack}.yaml)>"
                secret_keys.append(full_key)
                assumed.append(key)
    evaluation = evaluate(stack, config, secret_keys, program=project_dir / "__main__.py")
    evaluation.assumed_secrets = assumed
    return evaluation
