"""Random and malformed stack configs thrown at the loader and the program.

Property: every rejection is a ConfigError (or, for a model that cannot be placed, a PlanError) whose
every line names the stack file and a key path that exists in the input; never a traceback from
somewhere else. Every config the loader accepts evaluates as a whole program under mocks.
"""

from __future__ import annotations

import json
import math
import re
import string

from hypothesis import given
from hypothesis import strategies as st

from common import engine_metrics, gpus
from offline_plan.mock_runtime import PROJECT, evaluate
from planner import plan
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
# The capacity keys (stack_config/models.py LoadConfig, SweepConfig): rates and lengths at and beyond their bounds,
# NaN and infinity, a trough above the peak, a p95 below the mean, sweep levels out of order or beyond 256.
loads = maybe(
    st.fixed_dictionaries(
        {
            "peakRequestsPerSecond": maybe(st.sampled_from([0.5, 4, 40, 0, -1, 10**6, math.nan, math.inf])),
            "promptTokens": maybe(
                st.fixed_dictionaries(
                    {"mean": st.sampled_from([1, 1000, 0, 2**25, 1.5])},
                    optional={"p95": st.sampled_from([3000, 10, 2**24, -1])},
                )
            ),
            "outputTokens": maybe(
                st.fixed_dictionaries({"mean": st.sampled_from([200, 1, 0, "x"])}, optional={"p95": st.just(400)})
            ),
        },
        optional={
            "troughRequestsPerSecond": maybe(st.sampled_from([0, 1, 100, -0.5, math.nan])),
            "peakHoursPerDay": maybe(st.sampled_from([8, 24, 0, 25, math.inf])),
        },
    )
)
verifications = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "sweep": maybe(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "enabled": maybe(st.booleans()),
                        "concurrency": maybe(
                            st.sampled_from([[1, 2, 4, 8], [3], [8, 4], [1, 1], [], [0], [257], [1] * 9])
                        ),
                        "requestsPerLevel": maybe(st.sampled_from([8, 1, 0, 257])),
                        "promptTokens": maybe(st.sampled_from([64, 0, 2**25])),
                        "outputTokens": maybe(st.sampled_from([16, -1])),
                    },
                )
            )
        },
    )
)
# Loads a replica can carry or not (a TTFT of 50 ms, 400 requests/s): the capacity path's own refusals.
plausible_loads = st.fixed_dictionaries(
    {
        "peakRequestsPerSecond": st.sampled_from([0.5, 4, 40, 400, 5000, 1e-9, 100_000]),
        "promptTokens": st.fixed_dictionaries(
            {"mean": st.sampled_from([100, 1000, 4000, 30000, 1, 2**24])},
            optional={"p95": st.sampled_from([4000, 8000, 2**24])},
        ),
        "outputTokens": st.fixed_dictionaries({"mean": st.sampled_from([50, 200, 2000, 1])}),
    },
    optional={"troughRequestsPerSecond": st.sampled_from([0, 0.5]), "peakHoursPerDay": st.sampled_from([8, 24])},
)
sweeps = st.fixed_dictionaries(
    {
        "sweep": st.fixed_dictionaries(
            {"enabled": st.just(True)},
            optional={
                "concurrency": st.sampled_from([[1, 2, 4, 8], [3, 5, 256]]),
                "promptTokens": st.sampled_from([64, 4000, 40000]),
                "outputTokens": st.sampled_from([16, 5000]),
            },
        )
    }
)
capacity_stacks = st.fixed_dictionaries(
    {
        "cloud": st.just("aws"),
        "pools": st.sampled_from(
            [
                [{"name": "gpu-a", "gpu": "A100-80GB", "gpusPerNode": 8, "maxNodes": 1}],
                [{"name": "gpu-a", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 2}],
                [{"name": "gpu-a", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 2}],
            ]
        ),
        "models": st.lists(
            st.fixed_dictionaries(
                {
                    "repo": st.just(KNOWN_MODELS[0][0]),
                    "revision": st.just(KNOWN_MODELS[0][1]),
                    "pool": st.just("gpu-a"),
                    # Drawn by weight: one_of would flatten `loads`' junk branches into as many equal choices.
                    "load": st.integers(0, 3).flatmap(lambda k: loads if k == 0 else plausible_loads),
                },
                optional={
                    "verification": st.integers(0, 2).flatmap(lambda k: verifications if k == 0 else sweeps),
                    "maxModelLen": st.sampled_from([4096, 32768]),
                    "slo": st.fixed_dictionaries(
                        {
                            "timeToFirstToken": st.fixed_dictionaries(
                                {"seconds": st.sampled_from(engine_metrics.TIME_TO_FIRST_TOKEN_BUCKETS[:12])}
                            ),
                            "interTokenLatency": st.fixed_dictionaries(
                                {"seconds": st.sampled_from(engine_metrics.INTER_TOKEN_LATENCY_BUCKETS[:10])}
                            ),
                        }
                    ),
                    "autoscaling": st.fixed_dictionaries(
                        {}, optional={"minReplicas": st.integers(0, 3), "maxReplicas": st.integers(1, 4)}
                    ),
                },
            ),
            min_size=1,
            max_size=1,
        ),
    }
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
        "load": loads,
        "verification": verifications,
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


@fuzz_settings(default_examples=25, long_share=0.2)
@given(capacity_stacks)
def test_a_load_and_a_sweep_are_planned_or_refused_naming_a_key(raw):
    # The planner alone (no component evaluation): the capacity and the prediction are where these keys act.
    try:
        config = parse_stack_config(raw, SOURCE)
    except ConfigError as err:
        assert_names_a_key(err.problems, raw)
        return
    try:
        (p,) = plan.build_plans(config, plan.default_metadata_loader(None), source=SOURCE)
    except PlanError as err:
        # Nothing can carry the load, or a sweep the server would refuse: the plan stops with the key.
        problems = err.problems
        assert_names_a_key(problems, raw)
        assert all("models[0]" in problem or "pools[0]" in problem for problem in problems), problems
        return
    model = config.models[0]
    if model.load is not None:
        assert p.capacity is not None and p.prediction is not None
        if p.capacity.replicas_at_peak is not None:
            assert p.capacity.replicas_at_peak >= 1
            lengths = (p.prediction["promptTokens"], p.prediction["outputTokens"])
            if lengths == (model.load.promptTokens.mean, model.load.outputTokens.mean):
                assert p.prediction["highestConcurrencyAtSlo"] == p.capacity.concurrency_per_replica
