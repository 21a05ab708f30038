"""Issue 15, stack files: each class of hostile input the issue lists, as a named regression test.

Every case runs the offline plan (`offline_plan.write.run`, what `make plan` runs) on a stack file
written into a scratch project, and checks the exit code and that each problem line names the file
and the key. The two memory attacks (alias bombs) run in a worker under RLIMIT_AS.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from offline_plan import write
from offline_plan.mock_runtime import stack_file_config
from stack_config import ConfigError
from tests.support import paths
from tests.support.fuzz.harness import Worker
from tests.support.fuzz.strategies import FAKE_TOKENS

ROOT = paths.ROOT
DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
PROD = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())


def project(tmp_path: Path, text: str) -> Path:
    (tmp_path / "__main__.py").symlink_to(ROOT / "__main__.py")
    (tmp_path / "Pulumi.hostile.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))
    return tmp_path


def plan(tmp_path: Path, text: str, capsys) -> tuple[int, list[str], str]:
    code = write.run("hostile", tmp_path / "out", project(tmp_path, text))
    captured = capsys.readouterr()
    return code, captured.err.splitlines()[1:], captured.out + captured.err


def edited(doc: dict, key: str, path: str, value) -> str:
    """The stack file with `llm-serving:<key>` edited at `path` (dots and [i])."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    node = doc["config"].setdefault(f"llm-serving:{key}", {})
    parts = [int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", path) if p]
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[parts[-1]] = value
    return yaml.safe_dump(doc, sort_keys=False)


def refused(tmp_path, capsys, text: str, key: str, *words: str) -> str:
    code, problems, everything = plan(tmp_path, text, capsys)
    assert code == 2, everything
    assert "Traceback" not in everything
    named = [p for p in problems if p.startswith(f"  Pulumi.hostile.yaml: {key}")]
    assert named, problems
    for word in words:
        assert word in named[0], named[0]
    assert all(len(p) < 700 for p in problems), problems
    return named[0]


@pytest.mark.parametrize("region", ["us central1", "us-central1\n", "US-CENTRAL1", "us-central1 ", "europe_west4"])
def test_a_region_with_a_space_or_newline_is_refused(tmp_path, capsys, region):
    refused(tmp_path, capsys, edited(DEV, "cluster", "region", region), "cluster.region")


@pytest.mark.parametrize("cloud_doc, region", [(DEV, "us-east-1"), (PROD, "us-central1"), (PROD, "mars-north-1")])
def test_a_region_of_the_other_cloud_is_refused(tmp_path, capsys, cloud_doc, region):
    refused(tmp_path, capsys, edited(cloud_doc, "cluster", "region", region), "cluster.region", "region")


@pytest.mark.parametrize(
    "key, path", [("models", "[0].name"), ("cluster", "name"), ("models", "[0].revision"), ("pools", "[0].name")]
)
def test_a_name_ending_in_a_newline_never_reaches_a_manifest(tmp_path, capsys, key, path):
    doc = yaml.safe_load(yaml.safe_dump(DEV))
    text = edited(
        doc, key, path, "llama-3-1-8b-instruct\n" if "name" in path else "0e9e39f249a16976918f6564b8830bc894c89659\n"
    )
    line = refused(tmp_path, capsys, text, f"{key}{path if path.startswith('[') else '.' + path}")
    assert "line break" in line or "not" in line


@pytest.mark.parametrize(
    "key, path",
    [
        ("pools", "[0].maxNodes"),
        ("models", "[0].autoscaling.maxReplicas"),
        ("pools", "[0].minNodes"),
        ("models", "[0].replicas"),
    ],
)
def test_counts_of_ten_to_the_thirty_are_refused(tmp_path, capsys, key, path):
    refused(tmp_path, capsys, edited(DEV, key, path, 10**30), f"{key}{path}")


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_an_infinite_or_nan_queue_threshold_is_refused(tmp_path, capsys, value):
    text = edited(DEV, "models", "[0].autoscaling.queueThreshold", 5).replace(
        "queueThreshold: 5", f"queueThreshold: {value}"
    )
    refused(tmp_path, capsys, text, "models[0].autoscaling.queueThreshold", "finite")


def test_a_read_speed_of_a_billionth_mb_per_second_is_refused(tmp_path, capsys):
    # 1e-9 MB/s made a startup budget of 24 trillion seconds.
    refused(tmp_path, capsys, edited(DEV, "modelStore", "readMBps", 1e-9), "modelStore.readMBps", "10")


@pytest.mark.parametrize(
    "doc, bucket, word",
    [
        (DEV, "a..b", "adjacent periods"),
        (DEV, "192.168.1.1", "IP address"),
        (DEV, "Models", "lower-case"),
        (PROD, "xn--models", "xn--"),
        (PROD, "my-models-s3alias", "-s3alias"),
        (DEV, "goog-models", "goog"),
        (DEV, "my-google-models", "google"),
        (DEV, "my-g00gle-models", "google"),
    ],
)
def test_bucket_names_the_storage_refuses_are_refused(tmp_path, capsys, doc, bucket, word):
    refused(tmp_path, capsys, edited(doc, "modelStore", "bucketName", bucket), "modelStore.bucketName", word)


@pytest.mark.parametrize(
    "key, path, value",
    [
        ("modelStore", "existingClaim", "Bad Claim"),
        ("modelStore", "namespace", "Serving"),
        ("operators", "namespace", "gpu_operator"),
        ("exposure", "gateway", {"name": "gw!", "namespace": "infra"}),
        ("exposure", "gateway", {"name": "gw", "namespace": "infra.ns"}),
        ("exposure", "gateway", {"name": "gw", "namespace": "infra", "hostname": "llm.example.com:443"}),
        ("monitoring", "dashboardNamespace", "Grafana"),
        ("cluster", "rwxStorageClass", "nfs class"),
    ],
)
def test_claim_namespace_and_gateway_names_must_be_dns_names(tmp_path, capsys, key, path, value):
    refused(tmp_path, capsys, edited(DEV, key, path, value), f"{key}.{path}")


@pytest.mark.parametrize("url", ["not a url", "prometheus:9090", "ftp://prometheus", "http://", "http://h:0/x"])
def test_a_prometheus_url_that_is_not_a_url_is_refused(tmp_path, capsys, url):
    text = edited(DEV, "models", "[0].autoscaling", {"enabled": True, "prometheusUrl": url})
    refused(tmp_path, capsys, text, "models[0].autoscaling.prometheusUrl")


def test_a_url_with_credentials_is_refused_without_quoting_them(tmp_path, capsys):
    text = edited(
        DEV, "models", "[0].autoscaling", {"enabled": True, "prometheusUrl": "http://admin:hunter2secret@prom:9090"}
    )
    line = refused(tmp_path, capsys, text, "models[0].autoscaling.prometheusUrl", "credentials")
    assert "hunter2secret" not in capsys.readouterr().err + line


@pytest.mark.parametrize(
    "key, path",
    [("monitoring", "labels.release"), ("models", "[0].name"), ("models", "[0].chatTemplate"), ("cluster", "context")],
)
def test_a_token_pasted_into_an_ordinary_field_is_refused_and_never_quoted(tmp_path, capsys, key, path):
    for token in FAKE_TOKENS:
        code, _, everything = plan(tmp_path, edited(DEV, key, path, token), capsys)
        assert code == 2 and token not in everything and "looks like" in everything, everything
        for f in tmp_path.iterdir():
            f.unlink() if f.is_file() or f.is_symlink() else None


def test_a_plain_token_next_to_its_secure_entry_is_refused(tmp_path, capsys):
    text = (ROOT / "Pulumi.dev.yaml").read_text() + (
        f"  hfToken: {FAKE_TOKENS[0]}\n  llm-serving:hfToken:\n    secure: AAABAQ==\n"
    )
    code, problems, everything = plan(tmp_path, text, capsys)
    assert code == 2 and FAKE_TOKENS[0] not in everything
    assert problems == [
        (
            "  Pulumi.hostile.yaml: 'hfToken': set twice, as 'hfToken' and 'llm-serving:hfToken'; keep "
            "one (secrets only as `secure:`, set with `pulumi config set --secret hfToken`)"
        )
    ]


def test_a_secure_entry_with_a_plain_value_beside_it_is_refused(tmp_path, capsys):
    text = (ROOT / "Pulumi.dev.yaml").read_text() + (
        f"  llm-serving:hfToken:\n    secure: AAABAQ==\n    value: {FAKE_TOKENS[0]}\n"
    )
    code, problems, everything = plan(tmp_path, text, capsys)
    assert code == 2 and FAKE_TOKENS[0] not in everything and "secure" in problems[0]


@pytest.mark.parametrize(
    "text, where",
    [
        ("config:\n  llm-serving:monitoring:\n    1: x\n", "monitoring: key 1 is not a string"),
        ("config:\n  llm-serving:monitoring:\n    enabled: !!binary aGVsbG8=\n", "monitoring.enabled: a YAML bytes"),
        ("config:\n  llm-serving:monitoring: &a\n    labels: *a\n", ":3:13: the alias *a sits inside"),
        ("config:\n  llm-serving:monitoring: " + "[" * 10_000 + "]" * 10_000 + "\n", ":2:"),
        (
            "config:\n  llm-serving:models:\n  - maxModelLen: .inf\n",
            "models[0].maxModelLen: inf is not a finite number",
        ),
        ("config:\n  llm-serving:cloud: 2020-01-01\n", "cloud: a YAML date value"),
    ],
)
def test_yaml_oddities_are_errors_with_file_and_key(tmp_path, capsys, text, where):
    code, problems, everything = plan(tmp_path, text, capsys)
    assert code == 2 and "Traceback" not in everything
    assert any(p.startswith("  Pulumi.hostile.yaml") and where in p for p in problems), problems


def test_pipeline_stages_beyond_the_layers_are_refused_not_divided_by_zero(tmp_path, capsys):
    text = edited(DEV, "models", "[0].pipelineParallelSize", 64)
    refused(tmp_path, capsys, text, "models[0].pipelineParallelSize", "32 decoder layers")


def test_a_repo_id_with_a_newline_is_refused_before_the_hub_library_sees_it(tmp_path, capsys):
    code, problems, everything = plan(tmp_path, edited(DEV, "models", "[0].repo", "meta-llama/Llama-3.1-8B\n"), capsys)
    assert code == 2 and "HFValidationError" not in everything and "Repo id must use" not in everything
    assert problems[0].startswith("  Pulumi.hostile.yaml: models[0].repo: ")


def test_dtype_float32_sizes_the_weights_as_fp32(tmp_path, capsys):
    # On the prod H100s the 8B model fits either way; served as float32 its weights take twice the
    # memory of its bf16 checkpoint (vLLM casts them), where they used to be sized as bf16.
    def weights(dtype):
        doc = yaml.safe_load(yaml.safe_dump(PROD))
        doc["config"]["llm-serving:models"] = [dict(doc["config"]["llm-serving:models"][0], dtype=dtype)]
        # The sizing is under test, not prod's gate: its pack config is not in this bare project.
        doc["config"].pop("llm-serving:policyConfig")
        text = yaml.safe_dump(doc)
        for f in tmp_path.iterdir():
            f.unlink() if f.is_file() or f.is_symlink() else None
        code = write.run("hostile", tmp_path / "out", project(tmp_path, text))
        assert code == 0, capsys.readouterr().err
        plan_md = (tmp_path / "out" / "hostile" / "plan.md").read_text()
        return float(re.search(r"GiB in total, ([\d.]+) GiB on each", plan_md).group(1))

    assert weights("float32") == pytest.approx(2 * weights("auto"), rel=0.01)


def test_awq_on_a_bf16_checkpoint_is_refused_as_vllm_refuses_it(tmp_path, capsys):
    line = refused(
        tmp_path,
        capsys,
        edited(DEV, "models", "[0].quantization", "awq"),
        "models[0].quantization",
        "unquantized",
        "Cannot find the config file for awq",
    )
    assert "fp8" in line  # names the methods that do quantize while loading


def test_float32_with_a_quantized_checkpoint_is_refused(tmp_path, capsys):
    doc = yaml.safe_load(edited(DEV, "models", "[0].quantization", "fp8"))
    doc["config"]["llm-serving:models"][0]["dtype"] = "float32"
    refused(tmp_path, capsys, yaml.safe_dump(doc), "models[0].dtype", "not float32")


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    # Nine levels of ten aliases each stand for a billion values; it used to grow past 5 GB during
    # validation. In a worker under a 2 GB address-space limit it must end at once with exit 2.
    lines = ["config:", "  llm-serving:cloud: gcp", "  llm-serving:a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  llm-serving:a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    worker = Worker("plan")
    try:
        outcome = worker.run({"stack": "fuzz", "stack_text": "\n".join(lines) + "\n"}, 60)
    finally:
        worker.stop()
    assert outcome.clean and outcome.exit == 2, outcome.describe()
    assert "Pulumi.fuzz.yaml:" in outcome.stderr and "expand to more than" in outcome.stderr
    # (a hang would have been killed by the worker at 60 s and reported as one)


def test_the_stack_file_reader_caps_size_and_refuses_fifos(tmp_path):
    (tmp_path / "Pulumi.big.yaml").write_text("config:\n" + "#" * (2 * 1024 * 1024))
    with pytest.raises(ConfigError, match="more than the 1,048,576 this tool reads"):
        stack_file_config("big", tmp_path)
    import os

    os.mkfifo(tmp_path / "Pulumi.pipe.yaml")
    with pytest.raises(ConfigError, match="FIFO"):
        stack_file_config("pipe", tmp_path)
    (tmp_path / "Pulumi.latin.yaml").write_bytes(b"config:\n  llm-serving:cloud: caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        stack_file_config("latin", tmp_path)
    with pytest.raises(ConfigError, match="not a Pulumi stack name"):
        stack_file_config("../etc/passwd", tmp_path)


def test_error_messages_quote_only_a_short_escaped_excerpt(tmp_path, capsys):
    line = refused(tmp_path, capsys, edited(DEV, "cluster", "region", "x" * 50_000), "cluster.region")
    assert len(line) < 400 and "(50,000 characters)" in line


@pytest.mark.parametrize(
    "value, says",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
        ('{"a": "' + "x" * (2 * 1024 * 1024) + '"}', "more than the 1,048,576"),
    ],
)
def test_config_json_from_the_pulumi_cli_is_bounded(value, says):
    # `pulumi up` hands structured config to the program as JSON strings (stack_config/loader.py).
    from stack_config import decode_config_values

    raw, problems = decode_config_values({"llm-serving:monitoring": value}, set(), "dev")
    assert "monitoring" not in raw and len(problems) == 1 and says in problems[0] and len(problems[0]) < 300


@pytest.mark.parametrize("value", ["NaN", "Infinity", '{"x": NaN}', "9" * 5000])
def test_config_strings_that_json_reads_as_nan_or_huge_stay_strings_or_are_refused(value):
    from stack_config import ConfigError, decode_config_values, parse_stack_config

    raw, problems = decode_config_values({"llm-serving:cloud": value}, set(), "dev")
    assert problems or raw["cloud"] == value  # never float("nan") or a 5,000-digit int
    if not problems:
        with pytest.raises(ConfigError, match="cloud"):
            parse_stack_config({**raw, "pools": [], "models": []}, "Pulumi.dev.yaml")
