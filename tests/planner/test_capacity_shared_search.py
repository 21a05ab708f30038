"""The highest concurrency meeting the SLO is searched once per model: the capacity (planner/capacity.py) finds it
and the sweep prediction (planner/sweep_prediction.py) reuses it, with figures identical to a search of its own."""

from __future__ import annotations

import pytest

from planner import capacity, plan, sweep_prediction
from stack_config import parse_stack_config
from tests.support.stack_variants import DEV_MODELS

LOAD = {"peakRequestsPerSecond": 20, "promptTokens": {"mean": 1000}, "outputTokens": {"mean": 200}}
AWS_A100 = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 8, "maxNodes": 1}]}
SWEEP = {"sweep": {"enabled": True, "concurrency": [1, 3, 8]}}


def _plan(**model) -> plan.ModelPlan:
    raw = {"cloud": "aws", **AWS_A100, "models": [{**DEV_MODELS[0], "pool": "a100", **model}]}
    (p,) = plan.build_plans(parse_stack_config(raw, "Pulumi.test.yaml"), plan.default_metadata_loader(None), source="x")
    return p


def _counted(monkeypatch) -> list[int]:
    calls: list[int] = []
    search = sweep_prediction.highest_concurrency

    def counting(*args, **kwargs):
        calls.append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr(sweep_prediction, "highest_concurrency", counting)
    return calls


@pytest.mark.parametrize("verification", [{}, SWEEP], ids=["load", "load-and-sweep"])
def test_the_prediction_reuses_the_capacitys_search_and_its_figures_are_unchanged(monkeypatch, verification):
    calls = _counted(monkeypatch)
    shared = _plan(load=LOAD, verification=verification)
    assert calls == [] and shared.prediction["predicted"] is True
    # The same plan with the prediction searching on its own: the same prediction, level for level.
    monkeypatch.setattr(capacity, "remember_highest", lambda *args: None)
    alone = _plan(load=LOAD, verification=verification)
    assert calls == [1]
    assert alone.prediction == shared.prediction
    assert shared.prediction["highestConcurrencyAtSlo"] == shared.capacity.concurrency_per_replica


def test_a_sweep_at_other_lengths_searches_at_its_own(monkeypatch):
    calls = _counted(monkeypatch)
    p = _plan(load=LOAD, verification={"sweep": {"enabled": True, "outputTokens": 50}})
    assert calls == [1] and (p.prediction["promptTokens"], p.prediction["outputTokens"]) == (1000, 50)
