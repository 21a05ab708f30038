"""The sizing engine against vLLM logs from sources it was never calibrated on.

tests/fixtures/vllm_logs/held_out_by_source.yaml holds startup logs from other operators, GPUs and
releases than the calibration sources of cases.yaml (README.md there says which source is where).
No constant in planner/sizing.py was chosen with these cases in view; this file only measures.

The issue's goal for this set is a mean absolute error of at most 3% with 90% of the cases within 5%.
It is not met (the numbers are printed after every run that includes this file, see
tests/sizing_report.py): a case the engine cannot yet reproduce within the per-case tolerance is a
strict xfail whose message says why, so it turns into a failure the day it starts to match. The
aggregate checks below guard what is reached today against regressions, not the goal.
"""

from __future__ import annotations

import pytest

from tests.sizing_cases import CALIBRATION, HELD_OUT, config_path, predicted, relative_error, starts

BY_SOURCE = HELD_OUT
RUNNING = [c for c in BY_SOURCE if starts(c)]

CASE_TOLERANCE = 0.035
# Cases the engine does not reproduce within the tolerance, with the reason as far as it is known.
# Measured, not tuned: none of these was used to set a constant.
NOT_REPRODUCIBLE = {
    "h100-tp4-qwen3-235b-a22b-fp8-lmcache": (
        "run uses the LMCache KV connector (its GPU buffers are not modelled) and does not state the "
        "vLLM release; ~3.5 GiB per GPU of overhead is unexplained"
    ),
    "l4-qwen2.5-7b-instruct-defaults-0.8.5": (
        "vLLM 0.8.5 (before the 0.10 calibration logs): ~1 GiB more overhead than the same model under "
        "0.10.1.1 on A100; the log prints neither the KV memory nor the CUDA total to tell which term"
    ),
    "rtxpro6000-pcie-pp2-qwen3-32b-util0.426-0.27.1": (
        "Model Runner V2 (0.27.1) with pipeline parallelism: the first stage, which has no sampler, "
        "keeps 3.03 GiB outside weights and KV cache; the engine explains 1.6 GiB of it"
    ),
    "rtxpro6000-pcie-tp2-qwen3-32b-util0.426-0.27.1": (
        "Model Runner V2 (0.27.1) at TP 2 keeps only 1.66 GiB outside weights and KV cache, less than "
        "the sampler warm-up alone costs on one GPU (2.2 GiB) in every other log of 1024 sequences"
    ),
    "l40s-pcie-tp8-ep-qwen3-235b-a22b-fp8-0.10.2": (
        "expert parallelism over 8 PCIe L40S (vLLM 0.10.2): the log's 1.4 GiB activation peak is 0.8 "
        "GiB above the engine's sampler plus fused-MoE workspace"
    ),
    "l40s-pcie-tp8-ep-qwen3-vl-235b-a22b-fp8-nightly-0.11": (
        "same box and flags as the Qwen3-235B TP 8 + EP run, which the engine under-explains by 0.8 GiB; "
        "the release is a nightly and the FP8 weights are estimated"
    ),
    "rtxpro6000-pcie-pp4-qwen3-235b-a22b-fp8-0.27.1": (
        "pipeline parallel 4 from the post's table only: the most loaded stage's weights (55.70 GiB) are "
        "above the engine's per-stage estimate, and the stage the table reports is not stated"
    ),
}


def _repo_of(url: str) -> str:
    parts = url.split("/")
    return "/".join(parts[3:5]) if url.startswith("https://github.com/") else parts[2]


def test_the_set_shares_no_source_with_the_calibration_logs():
    calibration_repos = {_repo_of(c["source"]) for c in CALIBRATION}
    assert not {_repo_of(c["source"]) for c in BY_SOURCE} & calibration_repos


@pytest.mark.parametrize("case", BY_SOURCE, ids=[c["id"] for c in BY_SOURCE])
def test_case_quotes_the_numbers_it_is_scored_on(case):
    text = "\n".join(case["log_lines"])
    observed = case["observed"]
    assert case["source"].startswith("https://")
    if observed.get("kv_cache_gib") is not None:
        assert f"{observed['kv_cache_gib']:.2f} GiB" in text or f"{observed['kv_cache_gib']} GiB" in text
    if observed.get("kv_cache_tokens"):
        assert f"{observed['kv_cache_tokens']:,} tokens" in text
    if observed.get("weights_gib_per_gpu"):
        assert f"{observed['weights_gib_per_gpu']} GiB" in text
    assert observed.get("kv_cache_tokens") or observed.get("kv_cache_gib") is not None
    assert config_path(case).exists()


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=NOT_REPRODUCIBLE[c["id"]]))
     if c["id"] in NOT_REPRODUCIBLE else c for c in RUNNING],
    ids=[c["id"] for c in RUNNING],
)
def test_kv_cache_matches_a_log_from_an_unseen_source(case):
    error = relative_error(case)
    assert abs(error) <= CASE_TOLERANCE, f"{case['source']}: {error:+.2%}"


@pytest.mark.parametrize("case", [c for c in BY_SOURCE if not starts(c)],
                         ids=[c["id"] for c in BY_SOURCE if not starts(c)])
def test_a_run_that_did_not_start_is_predicted_not_to_fit(case):
    result = predicted(case)
    assert not result.fits and "no memory left for KV cache" in result.reason


# Measured with this engine (tests/sizing_report.py prints the breakdown); a change that makes the
# held-out sources worse fails here. The goal is 3% and 90%.
HELD_OUT_MAE_AT_MOST = 0.10
HELD_OUT_WITHIN_5_PERCENT_AT_LEAST = 0.50


def test_held_out_error_does_not_regress():
    errors = [abs(relative_error(c)) for c in RUNNING]
    mae = sum(errors) / len(errors)
    within = sum(e <= 0.05 for e in errors) / len(errors)
    assert len(errors) >= 12
    assert mae <= HELD_OUT_MAE_AT_MOST, f"held out by source: MAE {mae:.2%} over {len(errors)} cases"
    assert within >= HELD_OUT_WITHIN_5_PERCENT_AT_LEAST, f"held out by source: {within:.0%} within 5%"
