"""Variants of the committed stacks the add-on and first-apply tests share, each evaluated once.

Every variant is the real program under the mock runtime with a few config keys overridden: a
KServe model, a replica spanning nodes (LeaderWorkerSet), a Gateway route, KEDA autoscaling on a
pool that starts empty, and existing clusters with their add-ons declared present.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from offline_plan.mock_runtime import Evaluation, evaluate_stack, stack_file_config
from tests.support import paths
from tests.support.adapter_fixtures import CHAT, SQL, offline_cache

LLAMA_8B = {
    "repo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
    "gated": True,
    "maxModelLen": 8192,
}
LLAMA_70B = {
    "repo": "meta-llama/Llama-3.3-70B-Instruct",
    "revision": "38ff4e01a70559264c95945aa04b900a11e68422",
    "gated": True,
    "maxModelLen": 32768,
}
L4_POOL = {"name": "l4", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 4}

KSERVE, MULTI_NODE, GATEWAY, KEDA_DEV = "kserve", "multi-node", "gateway", "keda-dev"
EXISTING, EXISTING_RDMA = "existing", "existing-rdma"
ADAPTERS, DEV_ADAPTERS, EXISTING_ENTRANCE = "adapters", "dev-adapters", "existing-entrance"
# Two base models and an adapter behind the one entrance: on dev (GKE) through the Body-Based
# Router, on prod (EKS) through agentgateway's own body routing.
DEV_TWO_MODELS, PROD_TWO_MODELS = "dev-two-models", "prod-two-models"
# Where `pulumi up` runs from (deployer.runner): prod from a GitHub-hosted runner (its API endpoint
# public, restricted to a GitHub address range) and from a CodeBuild-hosted runner in its VPC.
PROD_GITHUB_HOSTED, PROD_CODEBUILD = "prod-github-hosted", "prod-codebuild"
# dev with its GKE IP endpoint private (private nodes), deployed from a GitHub-hosted runner: the
# DNS-based endpoint is the only way in.
DEV_PRIVATE_ENDPOINT = "dev-private-endpoint"
DEV_PRIVATE_ENDPOINT_OVERRIDES: dict[str, Any] = {
    "cluster": {"name": "llm-serving-dev", "region": "us-central1", "network": {"privateNodes": True}},
    "security": {"profile": "development", "clusterEndpoint": {"publicAccess": False}},
}

# The committed stacks' entrance needs add-ons an existing cluster must declare; variants that test
# something else leave it out (`exposure: {}`), the entrance variants below keep it.
# The committed models without their aliases, which only the entrance rewrites.
DEV_MODELS = [{**LLAMA_8B, "name": "llama-3-1-8b-instruct", "pool": "l4"}]
NO_ENTRANCE = {"exposure": {}}


def declared_enforcement(stack: str, enforcer: str = "calico") -> dict[str, Any]:
    """The committed stack's security section plus the NetworkPolicy enforcer an existing cluster
    must declare (its network plugin is its owner's; stack_config refuses networkPolicies without it)."""
    config, _ = stack_file_config(stack)
    security = json.loads(config.get("llm-serving:security", "{}"))
    return {"security": {**security, "networkPolicyEnforcement": enforcer}}


def existing_cluster(stack: str) -> dict[str, Any]:
    return {
        "cloud": "existing",
        "cluster": {"kubeconfig": "/etc/kubeconfig", "rwxStorageClass": "nfs"},
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        **declared_enforcement(stack),
        **NO_ENTRANCE,
    }


EXISTING_CLUSTER = existing_cluster("dev")
# prod with a VPC of its own, for tests of what prod creates in one (the committed prod takes its
# deployer stack's VPC, docs/deployer.md): an override for evaluate_stack.
PROD_OWN_VPC = {"cluster": {"name": "llm-serving-prod", "region": "us-east-1", "network": {"vpc": "create"}}}
# prod with its images through an ECR pull-through cache, credentials for the registries that need them.
_ECR_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/"
PROD_PULL_THROUGH = {
    "images": {
        "pullThrough": True,
        "upstreamCredentials": {"docker.io": _ECR_SECRET + "docker-hub-AbCdEf", "ghcr.io": _ECR_SECRET + "ghcr-AbCdEf"},
    }
}

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    PROD_GITHUB_HOSTED: (
        "prod",
        {
            "deployer": {"runner": "github-hosted"},
            "security": {
                "profile": "production",
                # A public GitHub address range (https://api.github.com/meta lists the current ones).
                "clusterEndpoint": {"publicAccess": True, "publicCidrs": ["140.82.112.0/20"]},
                "secretsEncryption": {"enabled": True},
            },
        },
    ),
    PROD_CODEBUILD: ("prod", {"deployer": {"runner": "codebuild"}}),
    DEV_PRIVATE_ENDPOINT: ("dev", DEV_PRIVATE_ENDPOINT_OVERRIDES),
    KSERVE: (
        "dev",
        {
            **NO_ENTRANCE,
            "pools": [L4_POOL],
            "models": [
                {**LLAMA_8B, "name": "llama-vllm", "pool": "l4"},
                {**LLAMA_8B, "name": "llama-kserve", "pool": "l4", "engine": "kserve"},
                {**LLAMA_8B, "name": "llama-kserve-hf", "pool": "l4", "engine": "kserve", "kserveStorage": "hf"},
            ],
        },
    ),
    MULTI_NODE: (
        "prod",
        {"models": [{**LLAMA_70B, "pool": "h100", "tensorParallelSize": 8, "pipelineParallelSize": 2}]},
    ),
    GATEWAY: (
        "dev",
        {
            "models": DEV_MODELS,
            "exposure": {"gateway": {"name": "public", "namespace": "gateways", "hostname": "llm.example.com"}},
        },
    ),
    KEDA_DEV: (
        "dev",
        {
            "pools": [L4_POOL],
            "models": [
                {
                    **LLAMA_8B,
                    "pool": "l4",
                    "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 1, "maxReplicas": 2},
                }
            ],
        },
    ),
    EXISTING: (
        "dev",
        {
            **EXISTING_CLUSTER,
            "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 2}],
            "addons": {"preinstalled": ["prometheusOperator", "keda"]},
            "models": [{**LLAMA_8B, "pool": "l4", "autoscaling": {"enabled": True, "kind": "keda"}}],
        },
    ),
    EXISTING_RDMA: (
        "prod",
        {
            **existing_cluster("prod"),
            "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 2}],
            "operators": {
                "gpuOperator": {"driver": "preinstalled"},
                "networkOperator": {"enabled": True, "interface": "ens1f0"},
            },
            "addons": {"preinstalled": ["prometheusOperator", "leaderWorkerSet"]},
            "models": [{**LLAMA_70B, "pool": "h100", "tensorParallelSize": 8, "pipelineParallelSize": 2}],
        },
    ),
    # The entrance with LoRA adapters (fixtures, found in a Hugging Face cache): on prod two base
    # models behind agentgateway, the 8B one with two adapters; on dev one base model behind GKE.
    ADAPTERS: (
        "prod",
        {
            "models": [
                {
                    **LLAMA_8B,
                    "name": "llama-3-1-8b-instruct",
                    "pool": "h100",
                    "aliases": ["meta-llama/Llama-3.1-8B-Instruct"],
                    "adapters": [{**SQL, "aliases": ["sql"]}, CHAT],
                },
                {**LLAMA_70B, "name": "llama-3-3-70b-instruct", "pool": "h100", "tensorParallelSize": "auto"},
            ]
        },
    ),
    DEV_ADAPTERS: ("dev", {"models": [{**LLAMA_8B, "name": "llama-3-1-8b-instruct", "pool": "l4", "adapters": [SQL]}]}),
    DEV_TWO_MODELS: (
        "dev",
        {
            "pools": [
                {**L4_POOL, "maxNodes": 1, "machineType": "g2-standard-8", "capacityType": "spot"},
                {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 4, "maxNodes": 1},
            ],
            "models": [
                {
                    **LLAMA_8B,
                    "name": "llama-3-1-8b-instruct",
                    "pool": "l4",
                    # A shorter context leaves the adapter's slot room for the concurrency target on one L4.
                    "maxModelLen": 6144,
                    "aliases": ["meta-llama/Llama-3.1-8B-Instruct"],
                    "adapters": [SQL],
                },
                {**LLAMA_70B, "name": "llama-3-3-70b-instruct", "pool": "h100", "tensorParallelSize": "auto"},
            ],
        },
    ),
    PROD_TWO_MODELS: (
        "prod",
        {
            "models": [
                {**LLAMA_8B, "name": "llama-3-1-8b-instruct", "pool": "h100", "adapters": [SQL]},
                {**LLAMA_70B, "name": "llama-3-3-70b-instruct", "pool": "h100", "tensorParallelSize": "auto"},
            ]
        },
    ),
    # An existing cluster with agentgateway and the entrance's add-ons declared.
    EXISTING_ENTRANCE: (
        "prod",
        {
            **existing_cluster("prod"),
            "exposure": {
                "entrance": {
                    "hostname": "llm.internal.example",
                    "implementation": "agentgateway",
                    "picker": {"failureMode": "FailClose"},
                    "tls": {"certificate": "secret", "secretName": "llm-tls"},
                }
            },
            "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 2}],
            "addons": {
                "preinstalled": [
                    "prometheusOperator",
                    "keda",
                    "gatewayApi",
                    "inferenceExtension",
                    "llmdRouter",
                    "agentgateway",
                ]
            },
        },
    ),
}


@functools.cache
def _cached(name: str) -> Evaluation:
    stack, overrides = VARIANTS[name]
    with offline_cache():
        return evaluate_stack(stack, overrides=overrides)


def variant(name: str, cluster_crds: set[str] | None = None, raise_errors: bool = True) -> Evaluation:
    """The evaluated variant; with `cluster_crds`, an existing cluster that has exactly those CRDs."""
    if cluster_crds is None and raise_errors:
        return _cached(name)
    stack, overrides = VARIANTS[name]
    with offline_cache():
        return evaluate_stack(stack, overrides=overrides, cluster_crds=cluster_crds, raise_errors=raise_errors)


_FAILING_RUN = """
import json, sys
from tests.support.stack_variants import variant
name, crds = sys.argv[1], set(json.loads(sys.argv[2]))
error = variant(name, cluster_crds=crds, raise_errors=False).error
print(json.dumps({"type": type(error).__name__, "name": getattr(error, "name", None),
                  "resource_id": getattr(error, "resource_id", None), "message": str(error)}))
"""


def failing_variant(name: str, cluster_crds: set[str]) -> dict[str, str | None]:
    """Evaluate a variant whose cluster lacks CRDs in a fresh interpreter; return its error.

    A program that fails mid-way leaves the SDK's worker threads and tasks behind; in a separate
    process they cannot disturb the tests that run after it.
    """
    import json
    import subprocess
    import sys

    root = paths.ROOT
    result = subprocess.run(
        [sys.executable, "-c", _FAILING_RUN, name, json.dumps(sorted(cluster_crds))],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise AssertionError(f"the evaluation printed no result:\n{result.stdout}\n{result.stderr[-3000:]}")
    return json.loads(lines[-1])
