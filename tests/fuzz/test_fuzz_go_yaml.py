"""Fuzzing the checker's reading of YAML against kubectl's (issue 28, the Go-YAML differential).

Property: for a manifest of drawn plain scalars and merge keys, the checker's refusals
(safe_yaml/go_reading.py `disagreements`) fall exactly on the lines where PyYAML and kubectl read
different values: no value reaches the checks under a reading the cluster does not share, and no
value both read alike is refused. kubectl converts the manifest on the client
(`kubectl annotate --local -o json`), one call per case. `make fuzz` draws many more cases.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from safe_yaml.go_reading import disagreements
from tests.support.fuzz.settings import fuzz_settings

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None and not os.environ.get("LLM_SERVING_REQUIRE_KUBECTL"), reason="kubectl is not installed"
)
# Characters that keep a value a single plain scalar while reaching every resolver branch.
SCALAR = st.text(alphabet="0123456789+-._eExXoObB:yYnNtTfFaA~", min_size=1, max_size=7)


def _plain(value: str) -> bool:
    try:
        loaded = yaml.safe_load(f"k: {value}\n")
    except yaml.YAMLError:
        return False
    finite = not isinstance(loaded.get("k") if isinstance(loaded, dict) else None, float) or (
        loaded["k"] == loaded["k"] and abs(loaded["k"]) != float("inf")
    )
    return isinstance(loaded, dict) and set(loaded) == {"k"} and finite


def _kubectl_spec(body: str) -> dict | None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\n" + body
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.yaml"
        path.write_text(manifest)
        done = subprocess.run(
            [KUBECTL or "kubectl", "annotate", "--local", "-f", str(path), "-o", "json", "x=1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    if done.returncode != 0:
        return None  # a value kubectl refuses outright (a Go float overflow, NaN): nothing to compare
    return json.loads(done.stdout)["spec"]


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


@fuzz_settings(default_examples=6, long_share=0.2)
@given(values=st.lists(SCALAR.filter(_plain), min_size=1, max_size=25))
def test_refusals_fall_exactly_where_kubectl_and_pyyaml_disagree(values):
    body = "spec:\n" + "".join(f"  k{i}: {v}\n" for i, v in enumerate(values))
    spec = _kubectl_spec(body)
    if spec is None:
        return
    py = yaml.safe_load(body)["spec"]
    refused = {int(p.split(":")[1]) - 1 for p in disagreements(body, "m.yaml", limit=len(values) + 1)}
    for i, value in enumerate(values):
        differ = not _same(py[f"k{i}"], spec[f"k{i}"])
        assert differ == (i + 1 in refused), (value, py[f"k{i}"], spec[f"k{i}"])


MERGE_KEYS = st.sampled_from(["a", "b", "c"])


@fuzz_settings(default_examples=6, long_share=0.2)
@given(
    explicit_before=st.lists(MERGE_KEYS, max_size=2, unique=True),
    merged=st.lists(st.lists(MERGE_KEYS, min_size=1, max_size=2, unique=True), min_size=1, max_size=2),
    explicit_after=st.lists(MERGE_KEYS, max_size=2, unique=True),
)
def test_merge_keys_are_refused_exactly_where_kubectl_and_pyyaml_disagree(explicit_before, merged, explicit_after):
    if set(explicit_before) & set(explicit_after):
        return  # a key written twice explicitly: both readers keep the last, another matter
    sources = [("{" + ", ".join(f"{k}: m{j}" for k in keys) + "}") for j, keys in enumerate(merged)]
    merge_value = sources[0] if len(sources) == 1 else "[" + ", ".join(sources) + "]"
    lines = [f"    {k}: before" for k in explicit_before] + [f"    <<: {merge_value}"]
    lines += [f"    {k}: after" for k in explicit_after]
    body = "spec:\n  m:\n" + "\n".join(lines) + "\n"
    spec = _kubectl_spec(body)
    assert spec is not None, body
    py = yaml.safe_load(body)["spec"]
    assert bool(disagreements(body, "m.yaml")) == (spec != py), (body, spec, py)
