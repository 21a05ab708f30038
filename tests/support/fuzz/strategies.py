"""Hypothesis strategies for hostile input: mutated stack files, config.json files and CLI flags,
manifests and pack configs, and misbehaving servers.

Each mutation starts from a real, valid input (the committed stacks, the fixture configs and
manifests) and breaks it in one to three places, so the fuzzing reaches past the first parse error
into validation, planning and the rules. Values that no receiving API accepts anywhere
(`ALWAYS_INVALID`) are marked, so a test can demand they are refused, not only that nothing crashed.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.support import paths

ROOT = paths.ROOT

# Tokens that look like secrets (made up, with the issuers' prefixes); they must never come out.
FAKE_TOKENS = (
    "hf_" + "Q" * 12 + "fuzzNotARealToken0123",
    "sk-proj-" + "fuzzNotARealKey" * 2,
    "ghp_" + "F" * 36,
    "AKIA" + "FUZZ" * 4,
)


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@dataclass(frozen=True)
class Hostile:
    """A value to plant; `always_invalid` when no field of the stack file may accept it."""

    value: Any
    always_invalid: bool = False
    # Control characters: invalid everywhere except a multi-line field (chatTemplate).
    control: bool = False


STRINGS = [
    Hostile("us-central1\n", control=True),
    Hostile("us central1"),
    Hostile(""),
    Hostile(" "),
    Hostile("a" * 10_000),
    Hostile("a" * 70_000, always_invalid=True),
    Hostile("a..b"),
    Hostile("192.168.1.1"),
    Hostile("UPPER-Case"),
    Hostile("-leading"),
    Hostile("trailing-"),
    Hostile("x" * 64),
    Hostile("ünïcödé"),
    Hostile("nul\x00byte", control=True),
    Hostile("esc\x1b[2Jape", control=True),
    Hostile("line\u2028sep", control=True),
    Hostile("tab\there", control=True),
    Hostile("http://user:secret@prometheus:9090"),
    Hostile("not a url"),
    Hostile("javascript:alert(1)"),
    Hostile("../../etc/passwd"),
    Hostile("${HOME}"),
    Hostile("{{ 7*7 }}"),
    Hostile("latest"),
    Hostile("a/b"),
    Hostile("xn--bucket"),
    Hostile("goog-bucket"),
    Hostile("my-google-bucket"),
    Hostile("*"),
    Hostile("auto"),
    Hostile("1g.10gb"),
    Hostile("0e9e39f249a16976918f6564b8830bc894c89659\n", control=True),
    Hostile("vllm/vllm-openai:latest"),
    Hostile("ftp://host/x"),
    Hostile("http://[::1"),
    Hostile("http://h:0/"),
    *[Hostile(token, always_invalid=True) for token in FAKE_TOKENS],
    Hostile(f"release-{FAKE_TOKENS[0]}", always_invalid=True),
]
NUMBERS = [
    Hostile(0),
    Hostile(-1),
    Hostile(1),
    Hostile(10**30),
    Hostile(2**63, always_invalid=True),
    Hostile(-(2**63) - 1, always_invalid=True),
    Hostile(10**400, always_invalid=True),
    Hostile(1e-9),
    Hostile(1e308),
    Hostile(float("nan"), always_invalid=True),
    Hostile(float("inf"), always_invalid=True),
    Hostile(float("-inf"), always_invalid=True),
    Hostile(0.5),
    Hostile(65),
    Hostile(10**7),
    Hostile(True),
    Hostile(False),
]
STRUCTURES = [
    Hostile(None),
    Hostile([]),
    Hostile({}),
    Hostile(deep(150), always_invalid=True),
    Hostile(deep(20)),
    Hostile({1: "int key"}, always_invalid=True),
    Hostile({"nested": {"key\nbreak": 1}}),
    Hostile(b"\x00binary\xff", always_invalid=True),
    Hostile(datetime.datetime(2020, 1, 1), always_invalid=True),
    Hostile(datetime.date(2020, 1, 1), always_invalid=True),
    Hostile(["a", "b"] * 50),
    Hostile({"k": "v"}),
]
HOSTILE = STRINGS + NUMBERS + STRUCTURES


def hostile_values() -> st.SearchStrategy[Hostile]:
    generated = st.one_of(
        st.text(string.printable, max_size=40).map(lambda s: Hostile(s, control=any(c in s for c in "\n\r\t\x0b\x0c"))),
        st.integers(-(2**70), 2**70).map(lambda i: Hostile(i, always_invalid=abs(i) > 2**63 - 1)),
        st.floats(allow_nan=False, allow_infinity=False).map(Hostile),
    )
    return st.one_of(st.sampled_from(HOSTILE), generated)


# ---------------------------------------------------------------------------------------------
# Stack files


STACK_FIELDS = [
    "cluster.region",
    "cluster.name",
    "cluster.gcpProject",
    "cluster.kubeconfig",
    "cluster.context",
    "cluster.rwxStorageClass",
    "cluster.create",
    "cluster.kubernetesVersion",
    "cluster.systemPool.machineType",
    "cluster.systemPool.minNodes",
    "cluster.systemPool.maxNodes",
    "cluster.systemPool.zones",
    "cluster.systemPool.diskGib",
    "pools[0].name",
    "pools[0].gpu",
    "pools[0].gpusPerNode",
    "pools[0].machineType",
    "pools[0].minNodes",
    "pools[0].maxNodes",
    "pools[0].desiredNodes",
    "pools[0].zones",
    "pools[0].diskGib",
    "pools[0].migProfile",
    "pools[0].capacityReservationId",
    "pools[0].capacityType",
    "modelStore.namespace",
    "modelStore.bucketName",
    "modelStore.prefix",
    "modelStore.mirrorPool",
    "modelStore.loadFrom",
    "modelStore.existingClaim",
    "modelStore.readMBps",
    "modelStore.downloaderImage",
    "modelStore.volumeHeadroom",
    "models[0].repo",
    "models[0].revision",
    "models[0].name",
    "models[0].pool",
    "models[0].tensorParallelSize",
    "models[0].pipelineParallelSize",
    "models[0].maxModelLen",
    "models[0].gpuMemoryUtilization",
    "models[0].kvCacheDtype",
    "models[0].dtype",
    "models[0].quantization",
    "models[0].replicas",
    "models[0].image",
    "models[0].maxNumSeqs",
    "models[0].maxNumBatchedTokens",
    "models[0].chatTemplate",
    "models[0].engine",
    "models[0].autoscaling.enabled",
    "models[0].autoscaling.minReplicas",
    "models[0].autoscaling.maxReplicas",
    "models[0].autoscaling.queueThreshold",
    "models[0].autoscaling.prometheusUrl",
    "operators.namespace",
    "operators.gpuOperator.chartVersion",
    "operators.gpuOperator.timeSlicingReplicas",
    "operators.gpuOperator.driver",
    "operators.gpuOperator.migStrategy",
    "operators.networkOperator.ipRange",
    "operators.networkOperator.interface",
    "operators.networkOperator.rdmaSharedDevices",
    "operators.networkOperator.enabled",
    "exposure.gateway.name",
    "exposure.gateway.namespace",
    "exposure.gateway.hostname",
    "monitoring.labels.release",
    "monitoring.dashboardNamespace",
    "monitoring.ttftP95Seconds",
    "monitoring.kvCacheUsageAlert",
    "hfToken",
    "apiKey",
    "cloud",
]
# Plausible values for the same fields (valid, or invalid only in combination), so many cases pass
# validation and reach planning, manifests and the policy pack.
PLAUSIBLE = {
    "models[0].quantization": ["fp8", "awq", "gptq", "mxfp4", "torchao", "fp8_per_block"],
    "models[0].dtype": ["float32", "float16", "bfloat16", "auto"],
    "models[0].kvCacheDtype": ["fp8", "auto"],
    "models[0].pipelineParallelSize": [1, 2, 33, 64],
    "models[0].tensorParallelSize": ["auto", 1, 2, 8, 3],
    "models[0].maxModelLen": [16, 4096, 131072, 10**6],
    "models[0].gpuMemoryUtilization": [0.5, 0.99],
    "models[0].replicas": [1, 2, 100],
    "models[0].maxNumSeqs": [1, 256, 65536],
    "models[0].maxNumBatchedTokens": [16, 8192],
    "models[0].name": ["chat", "a" * 63],
    "models[0].chatTemplate": ["{% for m in messages %}{{ m.content }}\n{% endfor %}"],
    "models[0].autoscaling.enabled": [True, False],
    "models[0].autoscaling.minReplicas": [0, 1, 100],
    "models[0].autoscaling.maxReplicas": [1, 4, 100],
    "models[0].autoscaling.queueThreshold": [0.001, 5, 10000],
    "models[0].autoscaling.prometheusUrl": ["http://prom:9090", "https://prom.example.com/api"],
    "modelStore.readMBps": [10, 1000, 200000],
    "modelStore.loadFrom": ["volume", "bucket", "existing-claim"],
    "modelStore.bucketName": ["my-models", "xn--models", "goog-models", "a-google-bucket", "my.models.bucket"],
    "modelStore.existingClaim": ["weights", "weights.v2"],
    "modelStore.volumeHeadroom": [1.0, 4.0],
    "pools[0].maxNodes": [1, 2, 5000, 5001],
    "pools[0].minNodes": [0, 1],
    "pools[0].diskGib": [50, 16384],
    "pools[0].zones": [["us-central1-a", "us-central1-b"], ["us-east-1a"]],
    "cluster.region": ["eu-west-1", "europe-west4", "us-central1-a", "us-gov-west-1"],
    "cluster.systemPool.zones": [["us-central1-a"]],
    "cluster.gcpProject": ["my-project-123"],
    "cluster.name": ["c", "a" * 41],
    "monitoring.labels.release": ["kube-prometheus-stack", ""],
    "monitoring.ttftP95Seconds": [0.1, 3600],
    "monitoring.dashboardNamespace": ["grafana", "0-ns"],
    "exposure.gateway.hostname": ["llm.example.com", "*.example.com"],
    "exposure.gateway.name": ["gw", "gw.v1"],
    "exposure.gateway.namespace": ["infra"],
    "operators.gpuOperator.timeSlicingReplicas": [2, 4],
    "operators.networkOperator.interface": ["ens1f0"],
    "operators.networkOperator.enabled": [True],
}


def _set(doc: dict, dotted: str, value: Any) -> None:
    """Set a dotted path (with [i] list indices) in the config mapping, creating sections."""
    parts: list[str | int] = []
    for piece in dotted.split("."):
        name, _, index = piece.partition("[")
        parts.append(name)
        if index:
            parts.append(int(index.rstrip("]")))
    node: Any = doc
    top = f"llm-serving:{parts[0]}"
    if not isinstance(node.get(top), (dict, list)) and len(parts) > 1:
        node[top] = {} if isinstance(parts[1], str) else [{}]
    if len(parts) == 1:
        node[top] = value
        return
    node = node[top]
    for i, part in enumerate(parts[1:-1], start=1):
        nxt = parts[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or len(node) <= part:
                return  # the list is shorter (a model without this index): nothing to plant
            if not isinstance(node[part], dict):
                node[part] = {}
            node = node[part]
        else:
            if not isinstance(node, dict):
                return
            if not isinstance(node.get(part), (dict, list)):
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        if isinstance(node, list) and len(node) > last:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value


def base_stack(name: str) -> dict:
    return yaml.safe_load((ROOT / f"Pulumi.{name}.yaml").read_text())


@dataclass
class StackCase:
    text: str
    must_refuse: bool
    planted: list[str] = field(default_factory=list)


def _must_refuse(dotted: str, planted: Hostile) -> bool:
    if planted.always_invalid:
        return True
    return planted.control and not dotted.endswith("chatTemplate")


@st.composite
def mutated_stacks(draw) -> StackCase:
    doc = copy.deepcopy(base_stack(draw(st.sampled_from(["dev", "prod"]))))
    config = doc["config"]
    must_refuse = False
    # The value last planted at each path: a later planting at the same path replaces an earlier one,
    # so whether the case must be refused is decided from what the file finally holds.
    planted_at: dict[str, Hostile] = {}
    for _ in range(draw(st.integers(0, 3))):
        plausible = draw(st.integers(0, 4)) < 3
        dotted = draw(st.sampled_from(sorted(PLAUSIBLE) if plausible else STACK_FIELDS))
        value = Hostile(draw(st.sampled_from(PLAUSIBLE[dotted]))) if plausible else draw(hostile_values())
        before = json.dumps(config, sort_keys=True, default=repr)
        _set(config, dotted, copy.deepcopy(value.value))
        if json.dumps(config, sort_keys=True, default=repr) != before:
            planted_at[dotted] = value
    must_refuse = any(_must_refuse(dotted, value) for dotted, value in planted_at.items())
    planted = sorted(planted_at)
    if draw(st.integers(0, 9)) == 0:
        config[draw(st.sampled_from(["llm-serving:typo", "llm-servng:models", "bad\nkey", "hfToken"]))] = "x"
        must_refuse = True
    text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False, width=10**6)
    return StackCase(text, must_refuse, planted)


def _alias_bomb(levels: int, width: int) -> str:
    lines = ["config:", "  llm-serving:cloud: gcp", f"  llm-serving:extra0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"  llm-serving:extra{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _merge_bomb() -> str:
    lines = ["config:", "  llm-serving:m0: &m0 {" + ", ".join(f"k{j}: v" for j in range(10)) + "}"]
    for i in range(1, 8):
        lines.append(f"  llm-serving:m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}]}}")
    return "\n".join(lines) + "\n"


DEV_TEXT = (ROOT / "Pulumi.dev.yaml").read_text()
RAW_STACK_TEXTS = [
    _alias_bomb(9, 10),
    _alias_bomb(30, 2),
    _merge_bomb(),
    "config:\n  llm-serving:monitoring: &a\n    labels: *a\n",
    "config:\n  llm-serving:models: &m [*m]\n",
    "config:\n  llm-serving:monitoring: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "config:\n  llm-serving:monitoring: " + "- " * 5000 + "x\n",
    "config:\n  llm-serving:cloud: gcp\n  llm-serving:cloud: aws\n",
    "config:\n  hfToken: " + FAKE_TOKENS[0] + "\n  llm-serving:hfToken:\n    secure: AAEAAQ==\n",
    "config:\n  llm-serving:hfToken:\n    secure: AAEAAQ==\n    value: " + FAKE_TOKENS[0] + "\n",
    DEV_TEXT + "  llm-serving:apiKey: " + FAKE_TOKENS[1] + "\n",
    DEV_TEXT.replace("  ", "\t"),
    DEV_TEXT + "---\nconfig: {}\n",
    DEV_TEXT.replace("us-central1", "us-central1\udcff"),  # a byte that is not UTF-8
    "",
    "# only a comment\n",
    "config:\n",
    "config: null\n",
    "config: [1, 2]\n",
    "- a\n- b\n",
    "just text\n",
    "config: !!python/object:os.system {}\n",
    "config:\n  ? [a, b]\n  : c\n",
    "config:\n  1: x\n",
    "config:\n  llm-serving:models: !!binary aGVsbG8=\n",
    "config:\n  llm-serving:cloud: 2020-01-01\n",
    "config:\n  llm-serving:pools: !!set {a, b}\n",
    DEV_TEXT + "#" * (2 * 1024 * 1024) + "\n",
    DEV_TEXT.replace("maxModelLen: 8192", "maxModelLen: " + "9" * 5000),
    DEV_TEXT.replace("maxModelLen: 8192", "maxModelLen: .nan"),
    DEV_TEXT.replace("llm-serving-dev", '"llm-serving-dev\\u0000"'),
]


# Odd but valid: a byte-order mark before the dev stack.
RAW_VALID_STACK_TEXTS = ["\ufeff" + DEV_TEXT]


def raw_stacks() -> st.SearchStrategy[StackCase]:
    return st.one_of(
        st.sampled_from(RAW_STACK_TEXTS).map(lambda text: StackCase(text, must_refuse=True)),
        st.sampled_from(RAW_VALID_STACK_TEXTS).map(lambda text: StackCase(text, must_refuse=False)),
    )


# Well-formed values that are wrong in meaning (issue 28's first class), each refused by the plan:
# a namespace the program must not own, a URL carrying credentials, CIDRs that together open a
# production endpoint to everyone, a derived name too long for its API, two models whose derived
# objects are one. (stack, dotted path, value); a prod path applies to prod only.
SEMANTIC = [
    ("any", "modelStore.namespace", "kube-system"),
    ("any", "modelStore.namespace", "default"),
    ("any", "modelStore.namespace", "monitoring"),
    ("any", "operators.namespace", "kube-public"),
    ("any", "operators.namespace", "cert-manager"),
    ("any", "monitoring.runbookUrl", "https://admin:hunter2@wiki.example.com/runbook.md"),
    ("any", "models[0].autoscaling.prometheusUrl", "http://u:p@prom:9090"),
    ("any", "models[0].name", "l" + "a" * 61),
    (
        "prod",
        "security.clusterEndpoint",
        {"publicAccess": True, "privateAccess": True, "publicCidrs": ["0.0.0.0/1", "128.0.0.0/1"]},
    ),
    ("prod", "models[1].name", "llama-3-1-8b-instruct-epp"),
]


@st.composite
def semantic_stacks(draw) -> StackCase:
    stack, dotted, value = draw(st.sampled_from(SEMANTIC))
    doc = copy.deepcopy(base_stack(stack if stack != "any" else draw(st.sampled_from(["dev", "prod"]))))
    _set(doc["config"], dotted, copy.deepcopy(value))
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=10**6)
    return StackCase(text, must_refuse=True, planted=[dotted])


def stack_cases() -> st.SearchStrategy[StackCase]:
    return st.one_of(mutated_stacks(), mutated_stacks(), raw_stacks(), semantic_stacks())


# ---------------------------------------------------------------------------------------------
# The sizing CLI


MODEL_CONFIGS = sorted((ROOT / "tests" / "fixtures" / "model_configs").glob("*/config.json"))
# Keys the sizing reads; a hostile value there must be refused or sized plausibly.
SIZING_KEYS = [
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "intermediate_size",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "first_k_dense_replace",
    "mlp_only_layers",
    "sliding_window",
    "sliding_window_pattern",
    "layer_types",
    "model_type",
    "torch_dtype",
    "architectures",
    "max_position_embeddings",
    "tie_word_embeddings",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "quantization_config",
    "text_config",
    "vision_config",
    "use_sliding_window",
]
# Values no sizing key may hold (a count that is not a positive whole number).
BAD_COUNT_VALUES = [-1, -8, True, "32", 3.5, float("nan"), float("inf"), 10**400, [], {}, None]
COUNT_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads"]


@dataclass
class SizingCase:
    argv: list[str]
    config_bytes: str | None
    must_refuse: bool
    log_bytes: str | None = None  # a startup log for --from-log {log}


def _collected_log_excerpts() -> list[str]:
    """The real vLLM start-up lines the project's sizing cases quote (tests/fixtures/vllm_logs)."""
    logs = ROOT / "tests" / "fixtures" / "vllm_logs"
    cases = [
        c
        for name in ("cases.yaml", "held_out_by_source.yaml")
        for c in yaml.safe_load((logs / name).read_text())["cases"]
    ]
    return ["\n".join(c["log_lines"]) + "\n" for c in cases]


LOG_EXCERPTS = _collected_log_excerpts()


@st.composite
def startup_logs(draw) -> tuple[str, bool]:
    """(log text as latin-1, whether it must be refused): a real excerpt, cut, its numbers made hostile,
    or bytes that are no log at all."""
    text = draw(st.sampled_from(LOG_EXCERPTS))
    kind = draw(st.sampled_from(["real", "cut", "numbers", "numbers", "binary", "noise"]))
    if kind == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif kind == "numbers":
        values = ["0", "-1", "1e999", "nan", "9" * 40, "0.0000001", "4097", "3,000,000,000,000", ""]
        text = re.sub(r"\d[\d,.]*", lambda m: draw(st.sampled_from([m.group(), *values])), text)
    elif kind == "binary":
        return "\x89PNG\x00\xff\xfe" + text[:200], True
    elif kind == "noise":
        return draw(st.text(max_size=400)).encode("utf-8", "surrogatepass").decode("latin-1"), False
    return text.encode("utf-8").decode("latin-1"), False


def _json_bytes(value: Any) -> str:
    return json.dumps(value, allow_nan=True).encode().decode("latin-1")


# Flag values the CLI must refuse (exit 2) whatever else the case holds.
SIZING_OPTIONS = {
    "--tensor-parallel-size": (["1", "2", "8", "3"], ["0", "-1", "1000000000000", "x"]),
    "--pipeline-parallel-size": (["1", "2"], ["10000000", "0", "4096"]),
    "--gpu-memory-utilization": (["0.9", "1"], ["1.5", "nan", "0", "-1"]),
    "--max-model-len": (["8192", "1"], ["0", "-5", "100000000000"]),
    "--dtype": (["auto", "float16"], ["int4"]),
    "--kv-cache-dtype": (["auto", "fp8"], ["int3"]),
    "--quantization": (["fp8", "fp8_per_tensor"], ["bogus", "\n", "gguf"]),
    "--weights-gib": (["10", "0.5"], ["0", "-3", "nan", "1e30"]),
    "--max-num-batched-tokens": (["2048", "16"], ["-4", "0", "99999999999"]),
    "--max-num-seqs": (["256", "1"], ["-1", "0", "10000000"]),
    "--block-size": (["16", "1", "4096"], ["0", "-16", "100000"]),
    "--vllm-version": (["0.19.0", "v0.32.0", "9999.1"], ["banana", "0.9\n"]),
}


@st.composite
def sizing_cases(draw) -> SizingCase:
    config = json.loads(draw(st.sampled_from(MODEL_CONFIGS)).read_text())
    must_refuse = False
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        key = draw(st.sampled_from(SIZING_KEYS))
        config[key] = (
            copy.deepcopy(draw(hostile_values()).value)
            if not draw(st.integers(0, 3))
            else draw(
                st.sampled_from(
                    [0, 1, 2, 7, 64, 10**7, 2**31, -3, 1.5, "x", [], {}, None, True, ["sliding"] * 3, {"bits": -4}]
                )
            )
        )
    if draw(st.integers(0, 4)) == 0:
        # Last, so nothing resets it: a count that is not a positive whole number (a falsy one counts
        # as missing, and these three are required).
        config[draw(st.sampled_from(COUNT_KEYS))] = draw(st.sampled_from(BAD_COUNT_VALUES))
        config.pop("text_config", None)
        must_refuse = True
    raw = draw(st.sampled_from(["json"] * 12 + ["deep", "binary", "nan", "huge_int", "empty", "list"]))
    if raw == "json":
        try:
            config_bytes = _json_bytes(config)
        except (TypeError, ValueError):
            config_bytes = _json_bytes({})
            must_refuse = True
    else:
        must_refuse = True
        config_bytes = {
            "deep": "[" * 50_000 + "]" * 50_000,
            "binary": "\x89PNG\x00\xff\xfe",
            "nan": '{"num_hidden_layers": NaN}',
            "huge_int": '{"num_hidden_layers": ' + "9" * 5000 + "}",
            "empty": "",
            "list": "[1, 2]",
        }[raw]
    flags = ["--model-config", "{config}"]
    if draw(st.booleans()):
        gpu = draw(st.sampled_from(["H100-80GB", "L4", "A100-80GB", "h100", "H200", "B200"] * 3 + ["V100", "A100"]))
        must_refuse |= gpu in ("V100", "A100")
        flags += ["--gpu", gpu]
    else:
        memory = draw(st.sampled_from(["80", "0.001", "79.19", "141", "4096"] * 3 + ["0", "-1", "nan", "inf", "1e9"]))
        must_refuse |= memory in ("0", "-1", "nan", "inf", "1e9")
        flags += ["--gpu-memory-gib", memory]
        if draw(st.booleans()):
            # A total outside the catalog is refused unless the machine is described (issue 29).
            flags += ["--interconnect", draw(st.sampled_from(["single", "pcie", "nvswitch", "unified"]))]
    log_bytes = None
    if draw(st.integers(0, 3)) == 0:
        log_bytes, refuse_log = draw(startup_logs())
        must_refuse |= refuse_log
        flags += ["--from-log", "{log}"]
    for flag in draw(st.lists(st.sampled_from(sorted(SIZING_OPTIONS)), max_size=4, unique=True)):
        good, bad = SIZING_OPTIONS[flag]
        value = draw(st.sampled_from(good * 3 + bad))
        must_refuse |= value in bad
        flags += [flag, value]
    if draw(st.booleans()):
        flags.append("--json")
    if draw(st.booleans()):
        flags.append("--enforce-eager")
    return SizingCase(flags, config_bytes, must_refuse, log_bytes)


# ---------------------------------------------------------------------------------------------
# The policy checker


POLICY_FIXTURES = sorted((ROOT / "tests" / "fixtures" / "policy").glob("good/*.yaml")) + sorted(
    (ROOT / "tests" / "fixtures" / "policy").glob("bad/*.yaml")
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


def _plant(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def _no_api_takes(value: Any) -> bool:
    """NaN, infinity or an integer beyond int64 anywhere in `value`: no Kubernetes API server takes it."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
        elif (isinstance(node, float) and (node != node or node in (float("inf"), float("-inf")))) or (
            isinstance(node, int) and not isinstance(node, bool) and abs(node) > 2**63 - 1
        ):
            return True
    return False


@dataclass
class CheckCase:
    files: dict[str, str]
    argv: list[str]
    config_bytes: str | None = None
    fifos: list[str] = field(default_factory=list)
    must_refuse: bool = False


MANIFEST_ATTACKS = [
    (
        "alias.yaml",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
        + "kind: List\napiVersion: v1\n",
    ),
    (
        "list-bomb.yaml",
        "apiVersion: v1\nkind: List\nitems: &i0\n- &p {apiVersion: v1, kind: Pod, metadata: {name: p}}\n"
        + "".join(
            f"x{i}: &i{i} [{{kind: List, items: *i{i - 1}}}, {{kind: List, items: *i{i - 1}}}, "
            f"{{kind: List, items: *i{i - 1}}}]\n"
            for i in range(1, 16)
        ),
    ),
    ("recursive.yaml", "a: &a\n  b: *a\nkind: Pod\n"),
    ("deep.yaml", "kind: Pod\nspec: " + "[" * 5000 + "]" * 5000 + "\n"),
    (
        "deep-list-kinds.yaml",
        "kind: List\nitems:\n" + "".join("  " * i + "- kind: List\n" + "  " * i + "  items:\n" for i in range(120)),
    ),
    (
        "big-int.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: c\n        image: x:1\n        startupProbe:\n"
        "          failureThreshold: " + "9" * 400 + "\n",
    ),
    ("nan.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {replicas: .nan}\n"),
    ("latin1.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n"),
    ("binary.yaml", "\x00\x01\x02\xff\xfe"),
    ("empty.yaml", ""),
    ("scalar.yaml", "just a string\n"),
    ("tags.yaml", "kind: !!python/name:os.system Pod\n"),
    ("many-docs.yaml", "---\n" * 20000),
    *[
        (f"malformed-{p.name}", p.read_text())
        for p in sorted((ROOT / "tests" / "fixtures" / "policy").glob("malformed/*"))
    ],
]
CONFIGS = [
    ('{"startup-probe-budget": {"minimumSeconds": NaN}}', True),
    ('{"startup-probe-budget": {"minimumSeconds": Infinity}}', True),
    ('{"startup-probe-budget": {"minimumSeconds": -1}}', True),
    ('{"startup-probe-budget": {"minimumSeconds": ' + "9" * 400 + "}}", True),
    ('{"startup-probe-budget": {"minimumSeconds": ' + "9" * 5000 + "}}", True),
    ("[" * 100_000 + "]" * 100_000, True),
    ('{"x": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}", True),
    ("\xff\xfe{}", True),
    ('{"all": "advisory"}', False),
    ('{"image-tag-pinned": {"requireDigest": true}}', False),
    ('{"nope": "mandatory"}', True),
    ('{"all": "sometimes"}', True),
    ("null", False),
    ("[]", True),
]


@st.composite
def check_cases(draw) -> CheckCase:
    files: dict[str, str] = {}
    must_refuse = False
    for n in range(draw(st.integers(1, 3))):
        fixture = draw(st.sampled_from(POLICY_FIXTURES))
        docs = list(yaml.safe_load_all(fixture.read_text()))
        for _ in range(draw(st.integers(0, 3))):
            index = draw(st.integers(0, len(docs) - 1))
            path = draw(st.sampled_from(_paths(docs[index])))
            planted = draw(hostile_values())
            docs[index] = _plant(docs[index], path, copy.deepcopy(planted.value))
        try:
            text = yaml.safe_dump_all(docs, allow_unicode=True, width=10**6)
            # Decided from the final documents (a later planting may replace an earlier one).
            must_refuse = must_refuse or any(_no_api_takes(doc) for doc in docs)
        except yaml.YAMLError:
            text = fixture.read_text()
        files[f"m{n}.yaml"] = text.encode("utf-8").decode("latin-1")
    if draw(st.integers(0, 2)) == 0:
        name, text = draw(st.sampled_from(MANIFEST_ATTACKS))
        files[name] = text
        must_refuse = must_refuse or name not in ("empty.yaml", "many-docs.yaml")
    fifos = ["pipe.yaml"] if draw(st.integers(0, 5)) == 0 else []
    argv = ["{folder}"]
    config_bytes = None
    if draw(st.booleans()):
        config_bytes, refused = draw(st.sampled_from(CONFIGS))
        must_refuse = must_refuse or refused
        argv = ["--config", "{config}", *argv]
    if draw(st.booleans()):
        argv = ["--json", *argv]
    return CheckCase(files, argv, config_bytes, fifos, must_refuse)


# ---------------------------------------------------------------------------------------------
# Servers


def scenarios(endpoints: tuple[str, ...]) -> st.SearchStrategy[dict[str, str]]:
    """Mostly honest endpoints with one or two faults."""
    from tests.support.fuzz.fault_server import behaviours

    @st.composite
    def build(draw) -> dict[str, str]:
        chosen = draw(st.lists(st.sampled_from(endpoints), min_size=0, max_size=2, unique=True))
        return {endpoint: draw(st.sampled_from(behaviours(endpoint))) for endpoint in chosen}

    return build()


# ---------------------------------------------------------------------------------------------
# A lying registry (tools/resolve_image_digests.py)


@dataclass(frozen=True)
class RegistryCase:
    answer: Any  # tests.support.registry_standin.Answer
    token: str | None
    # The exit status the resolver owes this case (0 resolved, 1 refused, 3 a digest check failed),
    # decided from what was planted, in the order the resolver's docstring gives its checks.
    expected_exit: int


GOOD_STATUS_LINES = [b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 200 Fine"]
BAD_STATUS_LINES = [b"HTCPCP/1.0 418 I'm a teapot", b"HTTP/1.1 2OO OK", b"", b"\x00\x01\x02", b"HTTP/9.9 200 OK"]
OTHER_STATUS_LINES = [b"HTTP/1.1 404 Not Found", b"HTTP/1.1 500 Oops", b"HTTP/1.1 204 No Content", b"HTTP/1.1 401 No"]
BAD_TOKENS = ["tok\x01", "tok\x7f", "t\u0085k", "tok en", "tok\u2603", "tok\u00e9", "tok\ten", "to\x00k"]
NOT_MANIFESTS = [
    b"",
    b"<html><body>Sign in</body></html>",
    b"[1, 2, 3]",
    b"null",
    b'{"schemaVersion": 1, "manifests": []}',
    b'{"schemaVersion": 2}',
    b'{"schemaVersion": 2, "manifests": [{"digest": 5}]}',
    b'{"schemaVersion": 2, "manifests": NaN}',
    b"[" * 10_000,
    b"\xff\xfe\x00garbage",
]
LIE_DIGESTS = ["sha256:" + "0" * 64, "md5:abc", "sha256:" + "A" * 64, "sha256:" + "ab" * 31]


@st.composite
def registry_lies(draw) -> RegistryCase:
    """A manifest answer with zero to three lies planted: the status line, the content type, the
    body (not a manifest, half of one, another kind), its framing (truncated, a bad chunk), the
    digest header, 150 headers, a token no Bearer header can hold."""
    from tests.support.registry_standin import Answer, manifest_of
    from tools.resolve_image_digests import INDEX_TYPES, MANIFEST_TYPES

    kind = draw(st.sampled_from(MANIFEST_TYPES))
    typed = draw(st.booleans())
    body_choice = draw(st.sampled_from(["honest", "honest", "honest", "half", "other", "binary"]))
    honest = manifest_of(kind, with_media_type=typed)
    body = {
        "honest": honest,
        "half": honest[: draw(st.integers(0, len(honest) - 1))],
        "other": draw(st.sampled_from(NOT_MANIFESTS)),
        "binary": draw(st.binary(max_size=64)),
    }[body_choice]
    content_type = draw(
        st.sampled_from([kind, kind, kind + "; charset=utf-8", *MANIFEST_TYPES, "text/html", "application/json", None])
    )
    status_line = draw(st.sampled_from(GOOD_STATUS_LINES * 4 + BAD_STATUS_LINES + OTHER_STATUS_LINES))
    framing = draw(st.sampled_from(["length", "length", "close", "chunked", "bad_chunk", "truncated"]))
    digest = draw(st.sampled_from(["honest", "honest", None, *LIE_DIGESTS]))
    many_headers = draw(st.integers(0, 9)) == 0
    token = draw(st.sampled_from([None] * 6 + BAD_TOKENS))
    extra = tuple((b"X-H%d" % i, b"v") for i in range(150)) if many_headers else ()
    answer = Answer(body, content_type, status_line, framing, digest, extra)

    base_type = (content_type or "").split(";")[0].strip()

    def is_index(media_type: str) -> bool:
        return media_type in INDEX_TYPES

    def expected() -> int:
        if token is not None:
            return 1  # refused before it is sent
        if status_line in BAD_STATUS_LINES or framing == "bad_chunk" or many_headers:
            return 1  # not HTTP
        if status_line not in GOOD_STATUS_LINES:
            return 1  # not 200
        if base_type not in MANIFEST_TYPES or framing == "truncated":
            return 1
        if digest not in ("honest", None):
            return 3
        if body_choice != "honest":
            # A prefix of a manifest or one of NOT_MANIFESTS is never one; random bytes could be
            # only by a miracle the property would report.
            return 1
        same_kind = is_index(kind) == is_index(base_type)
        docker = base_type not in (
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.oci.image.manifest.v1+json",
        )
        if kind == base_type or (not typed and same_kind and not docker):
            return 0
        return 1

    return RegistryCase(answer, token, expected())
