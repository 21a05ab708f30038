"""Evaluate the real Pulumi program with the SDK's mock runtime: no CLI, no cloud, no cluster.

The offline plan and the tests both go through here, so what they inspect is exactly what the
program asks the engine to create. Mocks echo inputs back as outputs (as `pulumi preview` shows
unknown-until-created values) and fill in the few outputs the program reads from a cloud resource
(a cluster endpoint, a node role ARN) with recognisable placeholders.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.sync_await import _sync_await

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "__main__.py"
PROJECT = "llm-serving"


# How the SDK marks a secret value on the wire; the mock monitor keeps the marker in the inputs.
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REDACTED = "<secret>"


def is_secret_value(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SECRET_SIG_KEY) == _SECRET_SIG


def redact_secrets(value: Any) -> Any:
    """A copy of `value` with every secret replaced by a marker: what plan files may show."""
    if is_secret_value(value):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
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

    @property
    def is_kubernetes_object(self) -> bool:
        # Providers, Helm releases and YAML groups are not objects the API server stores.
        return (
            self.type.startswith("kubernetes:")
            and not self.type.startswith(("kubernetes:helm.sh", "kubernetes:yaml", "kubernetes:kustomize"))
            and self.type != "pulumi:providers:kubernetes"
            and "kind" in self.inputs
        )


# Outputs a real provider computes that the program reads back. Placeholders say what they are.
_COMPUTED_OUTPUTS: dict[str, dict[str, Any]] = {
    "aws:eks/cluster:Cluster": {
        "endpoint": "https://mock-eks-endpoint.example",
        "certificateAuthority": {"data": "bW9jay1jYQ=="},
        "identities": [{"oidcs": [{"issuer": "https://oidc.eks.mock-region.amazonaws.com/id/MOCK"}]}],
    },
    "gcp:container/cluster:Cluster": {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "bW9jay1jYQ=="},
    },
    "aws:s3/bucket:Bucket": {"arn": "arn:aws:s3:::mock-bucket"},
    "aws:s3/bucketV2:BucketV2": {"arn": "arn:aws:s3:::mock-bucket"},
    "gcp:serviceaccount/account:Account": {"email": "mock-sa@mock-project.iam.gserviceaccount.com"},
}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also noting each resource's URN and parent (for the resource tree)."""

    def RegisterResource(self, request):
        self.mocks.current_parent = request.parent
        self.mocks.current_urn = self.make_urn(request.parent, request.type, request.name)
        return super().RegisterResource(request)


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[RecordedResource] = []
        self.calls: list[tuple[str, dict]] = []
        self.current_parent = ""
        self.current_urn = ""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(
            RecordedResource(
                args.typ, args.name, dict(args.inputs), args.provider, args.custom,
                urn=self.current_urn, parent_urn=self.current_parent,
            )
        )
        outputs = dict(args.inputs)
        outputs.setdefault("name", args.inputs.get("name", args.name))
        outputs.setdefault("arn", f"arn:aws:mock:::{args.name}")
        outputs.setdefault("id", f"{args.name}-id")
        for key, value in _COMPUTED_OUTPUTS.get(args.typ, {}).items():
            outputs.setdefault(key, value)
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/mock", "userId": "mock"}, None
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": "us-east-1", "region": "us-east-1"}, None
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com"}, None
        if args.token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {"json": json.dumps(args.args)}, None
        if args.token == "gcp:organizations/getProject:getProject":
            return {"projectId": "mock-project", "number": "123456789"}, None
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": "mock-project", "region": "us-central1"}, None
        return dict(args.args), None


@dataclass
class Evaluation:
    stack: str
    resources: list[RecordedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

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
        """Every Kubernetes object the program asks for, secrets redacted (as a plan shows them)."""
        return [redact_secrets(r.inputs) for r in self.resources if r.is_kubernetes_object]


def stack_file_config(stack: str, project_dir: Path = ROOT) -> tuple[dict[str, str], list[str]]:
    """Read Pulumi.<stack>.yaml the way the CLI hands config to a program.

    Values become strings (structured ones as JSON). Encrypted values (`secure: ...`) cannot be
    decrypted without the CLI, so they are replaced by a marked placeholder and listed as secret:
    the program sees a secret, never its value.
    """
    import yaml

    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise FileNotFoundError(f"no stack file {path.name}; stacks here: {', '.join(stacks) or 'none'}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ValueError(f"{path.name}: not valid YAML: {str(err).splitlines()[0]}") from None
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (doc.get("config") or {}).items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[full_key] = f"<secret {full_key} (encrypted in {path.name})>"
            secret_keys.append(full_key)
        elif isinstance(value, str):
            config[full_key] = value
        else:
            config[full_key] = json.dumps(value)
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
    evaluation = Evaluation(stack=stack, resources=mocks.resources)
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


def evaluate_stack(stack: str, project_dir: Path = ROOT, overrides: dict[str, Any] | None = None) -> Evaluation:
    """Evaluate a stack from its stack file, optionally overriding config keys (tests)."""
    config, secret_keys = stack_file_config(stack, project_dir)
    for key, value in (overrides or {}).items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        config[full_key] = value if isinstance(value, str) else json.dumps(value)
    return evaluate(stack, config, secret_keys, program=project_dir / "__main__.py")
