"""Random and malformed stack configs thrown at the loader and the program.

Property: every rejection is a ConfigError (or, for a model that cannot be placed, a PlanError) whose
every line names the stack file and a key path that exists in the input; never a traceback from
somewhere else. Every config the loader accepts evaluates as a whole program under mocks.
"""

from __future__ import annotations

import json
import re
import string

from hypothesis import given
from hypothesis import strategies as st

from common import gpus
from offline_plan.mock_runtime import PROJECT, evaluate
from planner.plan import PlanError
from stack_config import SECRET_KEYS, ConfigError, StackConfig, parse_stack_config
from tests.support.fuzz.settings import fuzz_settings

SOURCE = "Pulumi.fuzz.yaml"
# Models with committed metadata, so an accepted config can be planned offline.
KNOWN_MODELS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"),
    ("meta-llama/Llama-3.3-70B-Instruct", "38ff4e01a70559264c95945aa04b900a11e68422"),
]

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(string.printable, max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def maybe(valid, weight_junk: int = 1):
    """Mostly valid values, sometimes junk of any type."""
    return st.one_of(*([valid] * 4), *([junk] * weight_junk))


pool_names = st.sampled_from(["l4", "h100", "gpu-a", "pool"])
pools = st.fixed_dictionaries(
    {"name": maybe(pool_names), "gpu": maybe(st.sampled_from([*gpus.CATALOG, "H100", "V100"]))},
    optional={
        "gpusPerNode": maybe(st.sampled_from([1, 2, 4, 8, 3, 0])),
        "minNodes": maybe(st.integers(0, 3)),
        "maxNodes": maybe(st.integers(1, 4)),
        "capacityType": maybe(st.sampled_from(["on-demand", "spot", "capacity-block", "preemptible"])),
        "efa": maybe(st.booleans()),
        "diskGib": maybe(st.integers(20, 2000)),
        "machineTypo": st.just("x"),
    },
)
models = st.fixed_dictionaries(
    {
        "repo": maybe(st.sampled_from([r for r, _ in KNOWN_MODELS] + ["not a repo"])),
        "revision": maybe(st.sampled_from([s for _, s in KNOWN_MODELS] + ["main", "abc123"])),
        "pool": maybe(pool_names),
    },
    optional={
        "tensorParallelSize": maybe(st.sampled_from(["auto", 1, 2, 4, 8, "four", 0])),
        "maxModelLen": maybe(st.sampled_from([2048, 8192, 32768, 10**7, 8])),
        "gpuMemoryUtilization": maybe(st.floats(0.0, 1.2)),
        "kvCacheDtype": maybe(st.sampled_from(["auto", "fp8", "int4"])),
        "replicas": maybe(st.integers(0, 4)),
        "gated": maybe(st.booleans()),
        "image": maybe(st.sampled_from(["vllm/vllm-openai:v0.32.0", "vllm/vllm-openai:latest", "vllm/vllm-openai"])),
        "maxModelLenght": st.just(1),
        "autoscaling": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "enabled": st.booleans(),
                    "kind": st.sampled_from(["keda", "hpa", "vpa"]),
                    "minReplicas": st.integers(-1, 3),
                    "maxReplicas": st.integers(0, 5),
                    "queueThreshold": st.floats(-1, 20),
                    "kvCacheThreshold": st.floats(-0.5, 1.5),
                },
            )
        ),
        "slo": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "enabled": st.booleans(),
                    "timeToFirstToken": st.fixed_dictionaries(
                        {},
                        optional={
                            "seconds": st.sampled_from([2.5, 3, 0.001, -1, "fast"]),
                            "objective": st.floats(0.5, 1.5),
                        },
                    ),
                    "interTokenLatency": st.fixed_dictionaries(
                        {}, optional={"seconds": st.sampled_from([0.1, 0.12, 80]), "objective": st.floats(0.9, 1.0)}
                    ),
                },
            )
        ),
        "engine": maybe(st.sampled_from(["vllm", "kserve", "tgi"])),
        "kserveStorage": maybe(st.sampled_from(["bucket", "hf", "s3"])),
        "quantization": maybe(st.sampled_from(["fp8", "awq", "awk"])),
        "pipelineParallelSize": maybe(st.sampled_from([1, 2, 0])),
    },
)
stack_configs = st.fixed_dictionaries(
    {
        "cloud": maybe(st.sampled_from(["aws", "gcp", "existing", "azure"])),
        "pools": maybe(st.lists(pools, min_size=0, max_size=2)),
        "models": maybe(st.lists(models, min_size=0, max_size=2)),
    },
    optional={
        "cluster": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "kubeconfig": st.just("/tmp/kubeconfig"),
                    "rwxStorageClass": st.just("nfs"),
                    "nmae": st.just("x"),
                    "create": st.booleans(),
                    "kubernetesVersion": st.sampled_from(["1.33", "1.x"]),
                    "systemPool": st.fixed_dictionaries(
                        {},
                        optional={
                            "machineType": st.sampled_from(["m6i.2xlarge", "p5.48xlarge", "e2-standard-8"]),
                            "minNodes": st.integers(0, 3),
                            "maxNodes": st.integers(1, 3),
                        },
                    ),
                },
            )
        ),
        "modelStore": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "loadFrom": st.sampled_from(["volume", "bucket", "disk", "existing-claim"]),
                    "existingClaim": st.sampled_from(["weights", "Bad Claim"]),
                    "readMBps": st.floats(-5, 5000),
                    "prefix": st.sampled_from(["models", "/models/"]),
                    "mirrorPool": pool_names,
                },
            )
        ),
        "operators": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "gpuOperator": st.fixed_dictionaries(
                        {},
                        optional={
                            "driver": st.sampled_from(["auto", "operator", "preinstalled", "magic"]),
                            "migStrategy": st.sampled_from(["none", "single", "mixed"]),
                            "timeSlicingReplicas": st.integers(0, 8),
                            "chartVersion": st.sampled_from(["v26.7.0", "latest"]),
                        },
                    ),
                    "networkOperator": st.fixed_dictionaries(
                        {},
                        optional={
                            "enabled": st.booleans(),
                            "ipRange": st.sampled_from(["192.168.0.0/24", "10.0.0.1/24", "x"]),
                            "interface": st.just("ens1f0"),
                        },
                    ),
                    "namespace": st.sampled_from(["gpu-operator", "Bad NS"]),
                },
            )
        ),
        "monitoring": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "enabled": st.booleans(),
                    "labels": st.dictionaries(st.sampled_from(["release", "bad key"]), st.just("x")),
                    "ttftP95Seconds": st.floats(-1, 10),
                    "errorRateAlert": st.floats(-1, 2),
                    "runbookUrl": st.sampled_from(
                        ["docs/runbook.md", "https://x.example/runbook.md", "ftp://x", "a b.md"]
                    ),
                },
            )
        ),
        "exposure": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "gateway": st.fixed_dictionaries(
                        {"name": st.just("gw"), "namespace": st.just("infra")},
                        optional={"hostname": st.just("llm.example.com")},
                    )
                },
            )
        ),
        "extraKey": junk,
    },
)

KNOWN_TOP_KEYS = {f.alias or n for n, f in StackConfig.model_fields.items()} | set(SECRET_KEYS)
KEY_PATH = re.compile(r"^(?P<path>\(top level\)|[^:\s]+?)(?:: |$)")


def assert_names_a_key(problems: list[str], raw) -> None:
    assert problems, "a rejection without a message"
    for problem in problems:
        assert problem.startswith(f"{SOURCE}: "), problem
        rest = problem[len(SOURCE) + 2 :]
        match = KEY_PATH.match(rest)
        assert match, problem
        path = match.group("path")
        if path == "(top level)" or not isinstance(raw, dict):
            continue
        top = re.split(r"[.\[]", path)[0]
        # A key from the input, or a known key the input left out (a required or related setting).
        assert top in raw or top in KNOWN_TOP_KEYS, f"{problem!r} names {top!r}, which is no key"


@fuzz_settings(default_examples=100, long_share=1.0)
@given(stack_configs)
def test_every_rejection_names_a_key(raw):
    try:
        parse_stack_config(raw, SOURCE)
    except ConfigError as err:
        assert_names_a_key(err.problems, raw)


@fuzz_settings(default_examples=20, long_share=0.1)
@given(stack_configs)
def test_accepted_configs_evaluate(raw):
    try:
        parse_stack_config(raw, SOURCE)
    except ConfigError:
        return
    values = {f"{PROJECT}:{k}": json.dumps(v) if not isinstance(v, str) else v for k, v in raw.items()}
    values[f"{PROJECT}:hfToken"] = "<secret placeholder>"
    values["gcp:project"] = "fuzz-project"  # the provider's key a GKE stack needs (stack_config/gcp_project.py)
    try:
        evaluation = evaluate("fuzz", values, [f"{PROJECT}:hfToken"])
    except PlanError as err:
        # A model that does not fit its pool is a clean, named rejection too.
        assert_names_a_key(err.problems, raw)
        return
    assert evaluation.outputs["sizing"], "an accepted stack planned no model"
    assert evaluation.kubernetes_objects, "an accepted stack asked for no Kubernetes object"
