"""The checker reads YAML as kubectl does, or refuses it: every value PyYAML and Go's YAML would read
differently is refused with its line (safe_yaml/go_reading.py), checked against kubectl itself.

kubectl turns a manifest into JSON on the client (`kubectl annotate --local -f F -o json x=1` needs no
cluster); the differential below feeds it a corpus of plain scalars and merge-key documents and
holds both directions: where kubectl and PyYAML disagree the checker refuses the line, where they
agree it stays quiet. `.ci/run` installs kubectl (Debian's kubernetes-client) where none is on the
machine and sets LLM_SERVING_REQUIRE_KUBECTL, so there the differential runs rather than skips.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from safe_yaml import go_reading
from safe_yaml.go_reading import disagreements, dump_for_go, go_plain
from tests.support import paths

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None and not os.environ.get("LLM_SERVING_REQUIRE_KUBECTL"), reason="kubectl is not installed"
)

DISAGREE = {
    "privileged: y": "the boolean true to kubectl",
    "privileged: N": "the boolean false to kubectl",
    "replicas: 0o17": "the number 15 to kubectl",
    "replicas: 1e3": "the number 1000.0 to kubectl",
    "replicas: 08": "the number 8.0 to kubectl",
    "port: 1:20": "the string '1:20' to kubectl",
    "when: 2024-01-01": "the string '2024-01-01' to kubectl",
}
AGREE = [
    "a: true",
    "a: 'y'",
    'a: "n"',
    "a: 1",
    "a: 1.5",
    "a: 0x1f",
    "a: 1_000",
    "a: 017",
    "a: ~",
    "a: yes",
    "a: Off",
    "a: |\n  y\n",
    "a: !!str y",
    "a: !!int '5'",
    "a: x:latest",
]


@pytest.mark.parametrize("line", sorted(DISAGREE))
def test_a_value_the_two_readers_read_differently_is_refused_with_its_line(line):
    (problem,) = disagreements(f"spec:\n  {line}\n", "m.yaml")
    assert problem.startswith("m.yaml:2:"), problem
    assert DISAGREE[line] in problem and "quote it" in problem


@pytest.mark.parametrize("text", AGREE)
def test_a_value_both_readers_read_alike_passes(text):
    assert disagreements(text + "\n", "m.yaml") == []


def test_an_explicit_tag_only_go_can_apply_is_refused_not_a_traceback():
    (problem,) = disagreements("a: !!bool y\n", "m.yaml")
    assert problem.startswith("m.yaml:1:4:") and "cannot be read by PyYAML" in problem


def test_a_merge_key_after_an_explicit_key_it_sets_is_refused():
    text = "base: &b {image: 'vllm/vllm-openai:latest'}\nc:\n  image: vllm/vllm-openai@sha256:aa\n  <<: *b\n"
    (problem,) = disagreements(text, "m.yaml")
    assert problem.startswith("m.yaml:4:3:") and "sets image again" in problem


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {image: x}\nc:\n  <<: *b\n  image: z\n",  # explicit after the merge: both keep z
        "base: &b {env: x}\nc:\n  image: z\n  <<: *b\n",  # no key in common
        "a: &a {k: 1}\nb: &b {k: 2}\nc:\n  <<: [*a, *b]\n",  # both let the first listed win
    ],
)
def test_merges_both_readers_apply_alike_pass(text):
    assert disagreements(text, "m.yaml") == []


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "snippet,line",
    [
        ("        securityContext:\n          privileged: y\n", 13),
        ("        securityContext:\n          privileged: !!bool y\n", 13),
    ],
)
def test_the_checker_refuses_such_a_manifest_with_exit_2_and_the_line(tmp_path, snippet, line):
    manifest = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec:\n  selector: {}\n"
        "  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n"
        "      - name: c\n        image: vllm/vllm-openai@sha256:" + "a" * 64 + "\n" + snippet
    )
    done = subprocess.run(
        [sys.executable, "-m", "policies.check", str(_write(tmp_path, manifest))],
        capture_output=True,
        text=True,
        cwd=paths.ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"m.yaml:{line}:" in done.stderr + done.stdout


# --- differential against kubectl ---------------------------------------------------------------

ALPHABET = "0123456789+-._eExXoObB:yYnNaf"
FIXED = ["y", "n", "Y", "N", "on", "Off", "1e3", "1.", "-1.", "08", "0o17", "017", "1_000", "1:20", "0x1F"]
FIXED += ["2024-01-01", "2024-1-2", "2024-01-01T10:00:00Z", ".5", "-.5", "+.5", "1.5e3", "0b11", "-0b11", "12_34.5"]


def _corpus(seed: int = 20261203, size: int = 400) -> list[str]:
    rng = random.Random(seed)
    drawn = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6))) for _ in range(size)]
    usable = []
    for value in dict.fromkeys(FIXED + drawn):
        try:
            loaded = yaml.safe_load(f"k: {value}\n")
        except yaml.YAMLError:
            continue  # not a plain scalar in this position
        if not isinstance(loaded, dict) or set(loaded) != {"k"}:
            continue
        go = go_plain(value)
        py = loaded["k"]
        if any(isinstance(v, float) and not math.isfinite(v) for v in (go, py)):
            continue  # kubectl refuses NaN and infinity outright; so does the checker (json_value_problems)
        usable.append(value)
    return usable


def _kubectl_json(tmp_path: Path, body: str) -> dict:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\n" + body
    done = subprocess.run(
        [KUBECTL or "kubectl", "annotate", "--local", "-f", str(_write(tmp_path, manifest)), "-o", "json", "x=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _json_equal(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and a == b
    )


@needs_kubectl
def test_scalars_are_refused_exactly_where_kubectl_and_pyyaml_disagree(tmp_path):
    corpus = _corpus()
    body = "spec:\n" + "".join(f"  k{i}: {v}\n" for i, v in enumerate(corpus))
    spec = _kubectl_json(tmp_path, body)["spec"]
    refused_lines = {int(p.split(":")[1]) for p in disagreements(body, "m.yaml", limit=len(corpus) + 1)}
    wrong = []
    for i, value in enumerate(corpus):
        py = yaml.safe_load(f"k: {value}\n")["k"]
        py_json = py.isoformat() if hasattr(py, "isoformat") else py
        differ = not _json_equal(py_json, spec[f"k{i}"]) or type(py) not in (str, int, float, bool, type(None))
        differ = differ or (isinstance(py, bool) != isinstance(spec[f"k{i}"], bool))
        if differ != ((i + 2) in refused_lines):
            wrong.append((value, py, spec[f"k{i}"], differ))
    assert len(corpus) > 200
    assert wrong == [], wrong[:10]


MERGES = [
    "m:\n  image: a\n  <<: {image: b}\n",
    "m:\n  <<: {image: b}\n  image: a\n",
    "m:\n  <<: [{k: 1}, {k: 2}]\n",
    "m:\n  k: 0\n  <<: [{k: 1}, {k: 2}]\n",
    "m:\n  <<: {k: 1}\n  <<: {k: 2}\n",
    "m:\n  env: a\n  <<: {image: b}\n",
]


@needs_kubectl
@pytest.mark.parametrize("merge", MERGES)
def test_merges_are_refused_exactly_where_kubectl_and_pyyaml_disagree(tmp_path, merge):
    body = "spec:\n" + "".join(f"  {line}\n" for line in merge.splitlines())
    kubectl = _kubectl_json(tmp_path, body)["spec"]
    py = yaml.safe_load(body)["spec"]
    assert bool(disagreements(body, "m.yaml")) == (kubectl != py), (kubectl, py)


# --- what the plan writes reads the same to both -------------------------------------------------


SCALAR_TEXT = st.text(alphabet=ALPHABET + " #:'\"", min_size=0, max_size=8)


@given(st.dictionaries(SCALAR_TEXT, st.one_of(SCALAR_TEXT, st.integers(), st.booleans(), st.none()), max_size=8))
def test_the_manifest_writer_quotes_every_string_go_would_misread(data):
    text = dump_for_go({"spec": data})
    assert disagreements(text, "m.yaml") == []
    assert yaml.safe_load(text) == {"spec": data}


def test_the_plans_manifests_read_the_same_to_kubectl():
    """A label value `y` or an env value `1e3` written plain would reach the cluster as true or 1000."""
    text = dump_for_go({"metadata": {"labels": {"flag": "y", "n": "N"}}, "env": [{"value": "1e3"}]})
    assert "flag: 'y'" in text and "'n': 'N'" in text and "value: '1e3'" in text


# --- the writer's memos change no byte -------------------------------------------------------------


def _unmemoized(data) -> str:
    """PyYAML's own safe dumper with the writer's quoting, none of its memos."""

    class Plain(yaml.SafeDumper):
        pass

    Plain.add_representer(str, go_reading._represent_str)
    return yaml.dump(data, Dumper=Plain, sort_keys=False, default_flow_style=False)


LONG_TEXT = st.text(alphabet=ALPHABET + " #:'\"\n\t\\é", min_size=0, max_size=200)
YAML_DATA = st.recursive(
    st.one_of(LONG_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(SCALAR_TEXT, inner, max_size=4)),
    max_leaves=20,
)


@given(YAML_DATA)
def test_the_memoized_writer_writes_what_pyyaml_writes_the_first_time_and_every_time_after(data):
    # Long texts with spaces, quotes, escapes and line breaks are folded by the emitter at column 80:
    # the styles and the folds come from the memoized analysis.
    expected = _unmemoized(data)
    assert dump_for_go(data) == expected
    assert dump_for_go(data) == expected


def test_the_memo_tells_equal_looking_data_apart():
    # 1 and True and 1.0 and "1" compare or print alike in places; the texts differ, so must the keys.
    texts = [dump_for_go({"a": value}) for value in (1, True, 1.0, "1", "y")]
    assert texts == ["a: 1\n", "a: true\n", "a: 1.0\n", "a: '1'\n", "a: 'y'\n"]
    # A mapping held twice is written once with an anchor; two equal mappings are written twice.
    shared = {"k": "v"}
    assert dump_for_go([shared, shared]) == _unmemoized([shared, shared])
    assert "&id001" in dump_for_go([shared, shared])
    assert dump_for_go([{"k": "v"}, {"k": "v"}]) == "- k: v\n- k: v\n"
    # The same keys in another order are other text.
    assert dump_for_go({"a": 1, "b": 2}) == "a: 1\nb: 2\n" and dump_for_go({"b": 2, "a": 1}) == "b: 2\na: 1\n"


def test_a_chart_crd_is_written_as_pyyaml_writes_it():
    # A CRD as a chart ships it: long descriptions (folded at column 80), the most repeated keys.
    crd = yaml.safe_load((paths.ROOT / "charts/gpu-operator-v26.7.0/crds/nvidia.com_gpuclusters.yaml").read_text())
    expected = _unmemoized(crd)
    assert dump_for_go(crd) == expected and dump_for_go(crd) == expected
