"""The "did you mean" hints name what the user most likely meant."""

from __future__ import annotations

from common import gpus
from stack_config.cluster import PoolConfig
from stack_config.formats import did_you_mean
from tests.support.config_edits import base, problems_of


def test_a_prefix_of_one_catalog_name_suggests_that_name():
    # difflib alone rates H200 closer to "H100" (one character apart) than H100-80GB.
    assert did_you_mean("H100", gpus.CATALOG) == " (did you mean 'H100-80GB'?)"


def test_a_prefix_of_several_names_names_them_all():
    assert did_you_mean("A100", gpus.CATALOG) == " (did you mean 'A100-40GB' or 'A100-80GB'?)"


def test_a_misspelling_still_gets_the_closest_name():
    assert did_you_mean("modells", ["models", "monitoring"]) == " (did you mean 'models'?)"
    assert did_you_mean("zzz", gpus.CATALOG) == ""
    assert did_you_mean("", gpus.CATALOG) == ""


def test_a_pool_of_h100_is_told_about_h100_80gb():
    raw = base("aws")
    raw["pools"][0]["gpu"] = "H100"
    problems = problems_of(raw)
    assert any("unknown GPU 'H100' (did you mean 'H100-80GB'?)" in p for p in problems), problems


def test_the_gpu_key_documents_every_catalog_gpu():
    # The README's config reference is generated from this docstring (offline_plan/config_reference.py).
    doc = PoolConfig.model_fields["gpu"].description or ""
    missing = [name for name in gpus.CATALOG if name not in doc.replace("\n", " ")]
    assert not missing, f"pools[].gpu does not name {missing}"
