"""The plan's prediction per concurrency level (planner/sweep_prediction.py): the performance model's own figures at
the grid, the sweep's levels and the SLO's highest concurrency; carried in plan.json (`models[].prediction`; read back
in tests/components/verification/test_verification_sweep.py); none without a load or a sweep."""

from __future__ import annotations

from planner import plan, sweep_prediction
from planner.gpu_specs import PEAKS
from planner.model_arch import ModelArch
from planner.perf_model import EFFICIENCY, Replica, Workload, highest_concurrency, predict
from planner.sizing import SizingRequest
from stack_config import parse_stack_config
from tests.support.stack_variants import DEV_MODELS

LOAD = {"peakRequestsPerSecond": 20, "promptTokens": {"mean": 1000}, "outputTokens": {"mean": 200}}
AWS_A100 = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 8, "maxNodes": 1}]}


def _plan(**model):
    raw = {"cloud": "aws", **AWS_A100, "models": [{**DEV_MODELS[0], "pool": "a100", **model}]}
    (p,) = plan.build_plans(parse_stack_config(raw, "Pulumi.test.yaml"), plan.default_metadata_loader(None), source="x")
    return p


def _replica(p: plan.ModelPlan) -> Replica:
    """The replica as the plan sized it (its SizingResult), for the performance model's own figures."""
    arch = ModelArch.from_hf_config(p.metadata.config)
    request = SizingRequest(arch=arch, gpu_memory_gib=p.gpu.cuda_total_gib, max_model_len=p.max_model_len)
    return Replica(arch, p.gpu, PEAKS[p.gpu.name], request, p.sizing, EFFICIENCY[PEAKS[p.gpu.name].family])


def test_each_level_is_the_performance_models_figure():
    p = _plan(load=LOAD)
    pred = p.prediction
    assert pred["predicted"] is True and (pred["promptTokens"], pred["outputTokens"]) == (1000, 200)
    assert pred["efficiency"] == "ampere, calibrated"
    levels = {lv["concurrency"]: lv for lv in pred["levels"]}
    assert set(sweep_prediction.GRID) <= set(levels)
    r = _replica(p)
    for n, row in levels.items():
        assert row == sweep_prediction.level_row(predict(r, Workload(n, 1000, 200)))
    best, _ = highest_concurrency(r, 1000, 200, 2500, 100)
    # The SLO's point is the capacity table's (planner/capacity.py) and one of the levels.
    assert pred["highestConcurrencyAtSlo"] == best == p.capacity.concurrency_per_replica
    assert levels[best]["tpotMs"] == round(p.capacity.tpot_ms, 2)
    assert (pred["ttftSloMs"], pred["itlSloMs"]) == (2500.0, 100.0)


def test_no_load_and_no_sweep_means_no_prediction_and_a_sweep_sets_the_lengths():
    assert _plan().prediction is None
    swept = _plan(verification={"sweep": {"enabled": True, "concurrency": [3], "promptTokens": 64}})
    assert (swept.prediction["promptTokens"], swept.prediction["outputTokens"]) == (64, 128)
    assert 3 in {lv["concurrency"] for lv in swept.prediction["levels"]}
    # The sweep's lengths win over the load's; the load's fill what the sweep leaves out.
    both = _plan(load=LOAD, verification={"sweep": {"enabled": True, "outputTokens": 50}})
    assert (both.prediction["promptTokens"], both.prediction["outputTokens"]) == (1000, 50)
