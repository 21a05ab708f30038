"""The sizing engine against vLLM logs from sources it was never calibrated on.

tests/fixtures/vllm_logs/held_out_by_source.yaml holds startup logs from other operators, GPUs and
releases than the calibration sources of cases.yaml (README.md there says which source is where).
No constant in planner/sizing.py was chosen with these cases in view; this file only measures.

The issue's goal for this set is a mean absolute error of at most 3% with 90% of the cases within 5%,
on the cases within the planner's scope (a case outside it says why in `out_of_scope`: an external KV
connector, a release before 0.10, a summary table; it is still scored and reported apart). The numbers
are printed after every run that includes this file (tests/support/sizing_report.py). A case the engine cannot
yet reproduce within the per-case tolerance is a strict xfail whose message says why, so it turns into a
failure the day it starts to match. The aggregate checks below guard what is reached against regressions.
"""

from __future__ import annotations

import pytest

from tests.support.sizing_cases import CALIBRATION, HELD_OUT, config_path, in_scope, predicted, relative_error, starts

BY_SOURCE = HELD_OUT
RUNNING = [c for c in BY_SOURCE if starts(c)]

CASE_TOLERANCE = 0.035
# Cases the engine does not reproduce within the tolerance, with the reason as far as it is known.
# Measured, not tuned: none of these was used to set a constant.
NOT_REPRODUCIBLE = {
    "rtxpro6000-pcie-pp2-qwen3-32b-util0.426-0.27.1": (
        "Model Runner V2 (0.27.1) with pipeline parallel 2 on PCIe: both stages keep ~3.0 GiB outside weights and "
        "KV cache; the forward pass, the stage's NCCL buffers and (last stage) V2's penalties state explain "
        "1.6-2.2 GiB. V2 builds a second NCCL group for its pipeline broadcast (v1/worker/gpu/pp_utils.py, "
        "'pp_broadcast'); what it allocates over PCIe is not modelled"
    ),
    "l4-colab-llama-3.1-8b-util0.92-0.11.0": (
        "the log prints no CUDA total: the Colab L4 is sized with the AWS L4 figure (21.96 GiB), at which the log "
        "leaves 0.46 GiB for activations and workspaces, less than the PyTorch sampler's own 0.58 GiB for 128 "
        "rows (its log says FlashInfer is not available); a total near 22.3 GiB would close the gap, unconfirmed"
    ),
    "l40s-pcie-tp8-ep-qwen3-vl-235b-a22b-fp8-nightly-0.11": (
        "a nightly between 0.10.2 and 0.11.0 whose excerpt states neither the sampler path nor the encoder's profile "
        "budget, and no 'Model loading took' line (the FP8 weights are estimated)"
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
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=NOT_REPRODUCIBLE[c["id"]]))
        if c["id"] in NOT_REPRODUCIBLE
        else c
        for c in RUNNING
    ],
    ids=[c["id"] for c in RUNNING],
)
def test_kv_cache_matches_a_log_from_an_unseen_source(case):
    error = relative_error(case)
    assert abs(error) <= CASE_TOLERANCE, f"{case['source']}: {error:+.2%}"


@pytest.mark.parametrize(
    "case", [c for c in BY_SOURCE if not starts(c)], ids=[c["id"] for c in BY_SOURCE if not starts(c)]
)
def test_a_run_that_did_not_start_is_predicted_not_to_fit(case):
    result = predicted(case)
    assert not result.fits and "no memory left for KV cache" in result.reason


# Measured with this engine (tests/support/sizing_report.py prints the breakdown); a change that makes the
# held-out sources worse fails here. The goal (3% and 90%) is about the cases within the planner's scope.
HELD_OUT_MAE_AT_MOST = 0.025
HELD_OUT_WITHIN_5_PERCENT_AT_LEAST = 0.85


@pytest.mark.parametrize("within_scope", [False, True], ids=["all", "within-scope"])
def test_held_out_error_does_not_regress(within_scope):
    cases = [c for c in RUNNING if in_scope(c) or not within_scope]
    errors = [abs(relative_error(c)) for c in cases]
    mae = sum(errors) / len(errors)
    within = sum(e <= 0.05 for e in errors) / len(errors)
    assert len(errors) >= 42
    assert mae <= HELD_OUT_MAE_AT_MOST, f"held out by source: MAE {mae:.2%} over {len(errors)} cases"
    assert within >= HELD_OUT_WITHIN_5_PERCENT_AT_LEAST, f"held out by source: {within:.0%} within 5%"


def test_cases_outside_the_scope_say_why_and_the_reason_is_the_setup():
    """Only an external KV connector, a release before 0.10 or a summary table may take a case out."""
    allowed = ("KV connector", "older than the planner's range", "summary table")
    outside = [c for c in BY_SOURCE if not in_scope(c)]
    assert outside and all(any(word in c["out_of_scope"] for word in allowed) for c in outside)
    # Broken variant: a reason that is about the error is not one of them.
    assert not any(word in "the error is large" for word in allowed)
