"""Hypothesis strategies for the capacity and sizing tools' inputs (tests/fuzz/test_fuzz_capacity_tools.py).

Each strategy starts from a valid input, so the fuzzing reaches past the first parse error: the fixture
config.json files, the collected vLLM startup-log excerpts (strategies.LOG_EXCERPTS), a plan.json with one
predicted model (PLAN), and the tools' own flags with good values. It then breaks one to three things: a
flag's value (NaN, inf, negative, 1e308, 10**40, text), a key of a JSON document (a hostile value planted
at any path: wrong type, NaN, deep nesting, a missing key), or a log's lines (cut, repeated, contradicting
each other, non-UTF-8 bytes, one line of 200 KiB, a log of 1 MiB). Sizes are bounded so a case is fast;
the bound that matters is the tool's, which must refuse what it cannot use in one line.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz.strategies import LOG_EXCERPTS, MODEL_CONFIGS, _paths, _plant, deep

# The fixture configs small enough that a prediction is quick (the MoE and 70B ones too: TP is a flag).
CONFIGS = [p for p in MODEL_CONFIGS if p.parent.name in ("llama-3.1-8b", "qwen2.5-7b", "qwen3-30b-a3b", "gpt-oss-20b")]

# Flag values: (good, bad). A bad value must be refused (exit 2) with a line naming the flag.
NUMBERS_BAD = ["nan", "inf", "-inf", "-1", "0", "1e308", "1" + "0" * 40, "x", "", "0x10", "1_0"]
PERFORMANCE_OPTIONS = {
    "--tensor-parallel-size": (["1", "2", "4"], ["0", "-1", "3000", "nan", "1.5"]),
    "--dtype": (["auto", "bfloat16"], ["int4"]),
    "--kv-cache-dtype": (["auto", "fp8"], ["int3"]),
    "--max-model-len": (["4096", "8192"], ["0", "-5", "10000000000"]),
    "--max-num-seqs": (["64", "256", "1"], ["0", "-1", "100000000"]),
    "--max-num-batched-tokens": (["2048", "8192"], ["0", "-4", "99999999999"]),
    "--concurrency": (["1", "8", "64"], ["0", "-3", "65537", "nan"]),
    "--slo-ttft-p95-ms": (["1000", "250", "0.001"], ["0", "-1", "nan", "inf"]),
    "--slo-tpot-ms": (["50", "20", "1e9"], ["0", "-1", "nan", "inf"]),
    "--request-rate": (["4", "0.5", "40"], ["0", "-2", "nan", "inf"]),
    "--peak-tflops": (["900", "1", "0.1", "100000"], ["0", "-1", "nan", "1e-308", "1e308"]),
    "--link-gbps": (["300", "32", "0.1", "100000"], ["0", "-1", "inf", "1e-308", "1e308"]),
}
GPUS = ["H100-80GB", "A100-80GB", "L4", "L40S", "H200", "B200"]
BAD_GPUS = ["V100", "", "h100\n", "A100"]


@dataclass
class ToolCase:
    argv: list[str]
    files: dict[str, bytes]  # name -> content, written beside each other; argv names them as {name}
    bad_flag: str | None = None  # a flag given a value it must refuse


def _flags(draw, options: dict[str, tuple[list[str], list[str]]], bad_share: int = 4) -> tuple[list[str], str | None]:
    argv: list[str] = []
    bad = None
    for flag in draw(st.lists(st.sampled_from(sorted(options)), max_size=5, unique=True)):
        good, bad_values = options[flag]
        if bad is None and draw(st.integers(0, bad_share)) == 0:
            value = draw(st.sampled_from(bad_values + NUMBERS_BAD))
            # A value some flags take (0.001 ms is a valid SLO, 1e308 a valid TFLOPS) is not marked bad.
            bad = flag if value in bad_values or value in ("nan", "inf", "-inf", "x", "", "0x10") else None
            if flag in ("--peak-tflops", "--link-gbps") and value in ("1e308", "1" + "0" * 40):
                bad = flag  # beyond any GPU (planner/performance.py MEASURED_RANGE)
        else:
            value = draw(st.sampled_from(good))
        argv.append(f"{flag}={value}")
    return argv, bad


def _config_bytes(draw) -> bytes:
    config = json.loads(draw(st.sampled_from(CONFIGS)).read_text())
    kind = draw(st.sampled_from(["json"] * 8 + ["planted", "planted", "garbage", "deep", "empty"]))
    if kind == "planted":
        key = draw(st.sampled_from(["num_hidden_layers", "hidden_size", "num_key_value_heads", "torch_dtype", "x"]))
        config[key] = draw(st.sampled_from(HOSTILE_JSON))
    if kind == "garbage":
        return draw(st.binary(max_size=200))
    if kind == "deep":
        return b"[" * 5000 + b"]" * 5000
    if kind == "empty":
        return b""
    return json.dumps(config, allow_nan=True).encode()


@st.composite
def performance_cases(draw, explain: bool = False) -> ToolCase:
    """argv for planner.performance (or planner.capacity --explain) with a config.json; half the cases have
    only good values, so the fuzzing reaches the prediction, the SLO search and the replica count."""
    hostile = draw(st.booleans())
    argv = ["--model-config", "{config.json}"]
    bad = None
    if not hostile or draw(st.integers(0, 6)):
        argv += ["--gpu", draw(st.sampled_from(GPUS))]
    elif draw(st.booleans()):
        argv += ["--gpu", draw(st.sampled_from(BAD_GPUS))]
        bad = "--gpu"
    for flag, default in (("--input-len", "512"), ("--output-len", "128")):
        if not hostile or draw(st.integers(0, 5)):
            argv.append(f"{flag}={draw(st.sampled_from([default, '1', '8192', '100000']))}")
        else:
            argv.append(f"{flag}={draw(st.sampled_from(['0', '-1', 'nan', '2000000000', '1e3']))}")
            bad = bad or flag
    # A concurrency or an SLO: without either the tools ask for one.
    if draw(st.integers(0, 3)):
        argv.append(f"--concurrency={draw(st.sampled_from(['1', '16', '256', '65536']))}")
    if draw(st.integers(0, 2)):
        argv.append(f"--slo-ttft-p95-ms={draw(st.sampled_from(['1000', '100', '0.001', '1e9']))}")
    if draw(st.integers(0, 2)) == 0:
        argv.append(f"--slo-tpot-ms={draw(st.sampled_from(['50', '5', '1e-9', '1e9']))}")
    options = {k: v for k, v in PERFORMANCE_OPTIONS.items() if not any(a.startswith(k + "=") for a in argv)}
    flags, bad_flag = _flags(draw, options, bad_share=4 if hostile else 10**9)
    argv += flags
    bad = bad or bad_flag
    if explain and (not hostile or draw(st.integers(0, 8))):
        argv.append("--explain")
    if draw(st.booleans()):
        argv.append("--json")
    config = _config_bytes(draw) if hostile else draw(st.sampled_from(CONFIGS)).read_bytes()
    return ToolCase(draw(st.permutations(argv)) if draw(st.integers(0, 9)) == 0 else argv, {"config.json": config}, bad)


# ---------------------------------------------------------------------------------------------
# Startup logs for `components.sizing --from-log`


@st.composite
def hostile_logs(draw) -> bytes:
    """A collected excerpt made hostile: lines repeated, contradicting each other, cut, non-UTF-8, huge."""
    lines = draw(st.sampled_from(LOG_EXCERPTS)).splitlines()
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["repeat", "contradict", "cut", "drop", "shuffle", "numbers", "latin1", "long"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "repeat":
            lines[i:i] = [lines[i]] * draw(st.sampled_from([2, 10, 1000]))
        elif kind == "contradict":
            # The same line again with other numbers: two TP sizes, two GPU totals, two KV sizes.
            value = draw(st.sampled_from(["0", "1", "7", "1e999", "99999999", "0.0001", "-3"]))
            lines.insert(i + 1, re.sub(r"\d+(?:\.\d+)?", value, lines[i]))
        elif kind == "cut":
            lines = lines[:i]
        elif kind == "drop":
            del lines[i]
        elif kind == "shuffle":
            lines = draw(st.permutations(lines))
        elif kind == "numbers":
            value = draw(st.sampled_from(["nan", "inf", "-0", "9" * 40, "1,000,000,000,000,000", ""]))
            lines[i] = re.sub(r"\d[\d,.]*", value, lines[i])
        elif kind == "latin1":
            lines[i] = lines[i] + ("\udcff\udcfe" if draw(st.integers(0, 3)) == 0 else "\u00e9\u2028\ufeff")
        elif kind == "long":
            lines[i] = lines[i] + " " + "x" * (200 * 1024)
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 9)) == 0:
        text = text * max(1, (1024 * 1024) // max(1, len(text)))  # about 1 MiB of the same start-up, again and again
    return text.encode("utf-8", "surrogateescape")


@st.composite
def sizing_explain_cases(draw) -> ToolCase:
    argv = ["--model-config", "{config.json}"]
    if draw(st.booleans()):
        argv += ["--gpu", draw(st.sampled_from(GPUS))]
    files = {"config.json": _config_bytes(draw)}
    if draw(st.integers(0, 3)):
        argv += ["--from-log", "{startup.log}"]
        files["startup.log"] = draw(hostile_logs()) if draw(st.integers(0, 5)) else draw(st.binary(max_size=300))
    if draw(st.booleans()):
        argv.append("--explain")
    if draw(st.booleans()):
        argv.append("--json")
    if draw(st.integers(0, 3)) == 0:
        argv += ["--tensor-parallel-size", draw(st.sampled_from(["2", "4", "0", "nan"]))]
    return ToolCase(argv, files)


# ---------------------------------------------------------------------------------------------
# plan.json, for `loadtest --expect-from-plan` and `offline_plan.diff`


def plan_prediction(levels: tuple[int, ...] = (1, 2, 4, 8), **extra: object) -> dict[str, object]:
    """A model's `prediction` in plan.json (planner/sweep_prediction.py), as loadtest --expect-from-plan reads it:
    TTFT 100/150 ms, TPOT 10 ms and 50 output tokens/s per concurrent request at each level."""
    rows = [
        {"concurrency": c, "ttftMeanMs": 100.0, "ttftP95Ms": 150.0, "tpotMs": 10.0, "outputTokensPerSecond": 50.0 * c}
        for c in levels
    ]
    return {
        "predicted": True,
        "promptTokens": 16,
        "outputTokens": 4,
        "ttftSloMs": 500.0,
        "itlSloMs": 50.0,
        "highestConcurrencyAtSlo": 2,
        "levels": rows,
        **extra,
    }


PREDICTION = plan_prediction((1, 2, 4))
RESOURCE = {
    "custom": True,
    "ignoreChanges": [],
    "inputs": {"name": "llm-serving-dev", "location": "us-central1"},
    "kind": "gcp:container/cluster:Cluster",
    "label": "llm-serving-dev",
    "name": "llm-serving-dev",
    "replaceOnChanges": ["location"],
    "type": "gcp:container/cluster:Cluster",
    "urn": "urn:pulumi:dev::llm-serving::gcp:container/cluster:Cluster::llm-serving-dev",
}
# The shape `make plan` writes (offline_plan/plan_json.py), one predicted model and one object.
PLAN: dict[str, Any] = {
    "format": "llm-serving offline plan summary v1",
    "stack": "dev",
    "deployable": True,
    "reasons": [],
    "models": [
        {
            "model": "m",
            "gpu": "L4",
            "pool": "l4",
            "tensorParallelSize": 1,
            "kvCacheTokens": 27520,
            "minReplicas": 1,
            "maxReplicas": 2,
            "replicasAtPeak": 2,
            "costPerHourAtPeak": 1.5,
            "prediction": PREDICTION,
        }
    ],
    "gpus": [{"pool": "l4", "gpu": "L4", "maxNodes": 2, "maxCostPerHour": 3.0}],
    "verdicts": [{"level": "advisory", "policy": "p", "resource": "r", "message": "m"}],
    "images": [{"repository": "docker.io/vllm/vllm-openai", "tag": "v0.11.0", "digest": None, "usedBy": "vLLM"}],
    "warnings": ["w"],
    "resources": [RESOURCE],
}
HOSTILE_JSON: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    10**30,
    1e308,
    -1e308,
    "",
    "x" * 5000,
    "ünï\u2028",
    [],
    {},
    [1, "a", None],
    {"k": {"k": []}},
    deep(90),
    float("nan"),  # written as NaN: not JSON, refused by the reader
]
_DELETE = object()


def _mutated(draw, doc: Any, at_most: int = 3) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, at_most))):
        paths = [p for p in _paths(doc) if p not in ((), ("format",))] or [()]
        path = draw(st.sampled_from(paths))
        value = draw(st.sampled_from([*HOSTILE_JSON, _DELETE]))
        if value is _DELETE:
            if not path:
                continue
            node = doc
            for part in path[:-1]:
                node = node[part]
            del node[path[-1]]
        else:
            doc = _plant(doc, path, copy.deepcopy(value))
    return doc


@st.composite
def plan_json_bytes(draw) -> bytes:
    kind = draw(st.sampled_from(["valid", "mutated", "mutated", "mutated", "mutated", "cut", "garbage", "latin1"]))
    text = json.dumps(PLAN)
    if kind == "mutated":
        text = json.dumps(_mutated(draw, PLAN), allow_nan=True)
    elif kind == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif kind == "garbage":
        return draw(st.binary(max_size=300))
    elif kind == "latin1":
        return text.replace('"m"', '"m\xe9"').encode("latin-1")
    return text.encode()


@st.composite
def loadtest_expect_cases(draw) -> ToolCase:
    """loadtest --expect-from-plan (or explicit --expect-* values) against a port nobody listens on: a
    usable prediction gets as far as the connection (exit 1); an unusable one is a usage error (exit 2)."""
    argv = ["--base-url", "http://127.0.0.1:9", "--requests", "1", "--timeout", "2", "--request-timeout", "1"]
    if draw(st.integers(0, 4)):
        argv += ["--model", draw(st.sampled_from(["m", "other", ""]))]
    argv += ["--concurrency", draw(st.sampled_from(["1,2,4", "1", "8", "2,4"]))]
    files = {}
    if draw(st.integers(0, 4)):
        argv += ["--expect-from-plan", "{plan.json}"]
        files["plan.json"] = draw(plan_json_bytes())
    if draw(st.integers(0, 2)) == 0:
        flag = draw(
            st.sampled_from(
                ["--expect-ttft-ms", "--expect-tpot-ms", "--expect-output-tps", "--expect-highest-concurrency"]
            )
        )
        argv.append(f"{flag}={draw(st.sampled_from(['100', '1,2,3', 'nan', '-1', '1e10', '', '2']))}")
    if draw(st.integers(0, 3)) == 0:
        argv.append(f"--slo-ttft-ms={draw(st.sampled_from(['500', '400', 'nan', '-1']))}")
    if draw(st.integers(0, 3)) == 0:
        argv.append(f"--prompt-tokens={draw(st.sampled_from(['fixed:16', 'fixed:17', 'normal:16,2', 'uniform:1,3']))}")
    return ToolCase(argv, files)


@st.composite
def plan_diff_cases(draw) -> ToolCase:
    files = {}
    argv = []
    for side in ("base", "head"):
        kind = draw(st.sampled_from(["plan"] * 6 + ["missing", "folder_missing"]))
        if kind == "plan":
            files[f"{side}/plan.json"] = draw(plan_json_bytes())
            argv.append("{" + side + "}")
        elif kind == "missing":
            files[f"{side}/other.txt"] = b""
            argv.append("{" + side + "}")
        else:
            argv.append("{nowhere}")
    return ToolCase(argv, files)
