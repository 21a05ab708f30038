"""The plan's prediction per concurrency level, for a load sweep to be checked against.

A model with `load`, or with `verification.sweep.enabled`, gets, at plan time, the performance
model's figures (planner/perf_model.py) at every level of a fixed grid (powers of two), at the
levels of its own sweep and at the highest concurrency meeting its `slo`: TTFT mean and p95, TPOT
(= ITL) and output tokens per second, at one prompt and output length. plan.json carries them
(`models[].prediction`), so `python -m components.loadtest --expect-from-plan build/<stack>/plan.json`
reports predicted against measured without the planner (the endpoint tools are standard library
only); the verification Job's targets file carries the same for its short sweep
(components/verification/job.py). A replica the performance model does not cover gets the reason
instead of numbers (planner/capacity.py decides which). Pure arithmetic over the plan's sizing.
"""

from __future__ import annotations

from typing import Any

from planner.capacity import CapacityInputs, remembered_highest, replica_for
from planner.perf_model import Prediction, Workload, highest_concurrency, predict

# The levels every prediction carries: a sweep of powers of two (`--concurrency 1,2,4,8`) finds its
# levels here; a level off the grid is predicted when the model's own sweep names it.
GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# The sweep's lengths when neither `verification.sweep` nor `load` names them.
DEFAULT_PROMPT_TOKENS = 512
DEFAULT_OUTPUT_TOKENS = 128
FORMAT = "llm-serving prediction v1"


def lengths(i: CapacityInputs) -> tuple[int, int]:
    """The prompt and output tokens a model's prediction (and its Job's sweep) uses."""
    sweep, load = i.model.verification.sweep, i.model.load
    prompt = sweep.promptTokens or (load.promptTokens.mean if load else DEFAULT_PROMPT_TOKENS)
    output = sweep.outputTokens or (load.outputTokens.mean if load else DEFAULT_OUTPUT_TOKENS)
    return prompt, output


def level_row(p: Prediction) -> dict[str, Any]:
    return {
        "concurrency": p.concurrency,
        "ttftMeanMs": round(p.ttft_ms, 1),
        "ttftP95Ms": round(p.ttft_p95_ms, 1),
        "tpotMs": round(p.tpot_ms, 2),
        "outputTokensPerSecond": round(p.output_tokens_per_s, 1),
    }


def sweep_problem(i: CapacityInputs) -> str | None:
    """A sweep whose requests the server would refuse: a plan error naming the key."""
    sweep = i.model.verification.sweep
    if not sweep.enabled:
        return None
    prompt, output = lengths(i)
    if prompt + output > i.sizing.max_model_len:
        return (
            f"{i.key}.verification.sweep: {prompt:,} prompt + {output:,} output tokens exceed maxModelLen "
            f"{i.sizing.max_model_len:,}; lower promptTokens/outputTokens"
        )
    return None


def prediction(i: CapacityInputs) -> dict[str, Any] | None:
    """plan.json's `models[].prediction`: None unless the model has a load or an enabled sweep."""
    sweep = i.model.verification.sweep
    if i.model.load is None and not sweep.enabled:
        return None
    prompt, output = lengths(i)
    ttft_ms = i.model.slo.timeToFirstToken.seconds * 1000
    itl_ms = i.model.slo.interTokenLatency.seconds * 1000
    out: dict[str, Any] = {
        "format": FORMAT,
        "promptTokens": prompt,
        "outputTokens": output,
        "ttftSloMs": round(ttft_ms, 1),
        "itlSloMs": round(itl_ms, 1),
        "predicted": False,
        "notPredicted": None,
        "efficiency": None,
        "highestConcurrencyAtSlo": None,
        "levels": [],
    }
    r = replica_for(i)
    if isinstance(r, str):
        return {**out, "notPredicted": r}
    if prompt + output > min(i.sizing.max_model_len, i.sizing.kv_cache_tokens):
        return {**out, "notPredicted": f"{prompt + output:,} tokens per request exceed maxModelLen or the KV pool"}
    # The capacity's search when it ran at these lengths (a model with a load): the same replica, the same figures.
    found = remembered_highest(i, (prompt, output), (ttft_ms, itl_ms))
    best, at = found if found is not None else highest_concurrency(r, prompt, output, ttft_ms, itl_ms)
    levels = sorted({*GRID, *(sweep.concurrency if sweep.enabled else ()), *([best] if best else [])})
    return {
        **out,
        "predicted": True,
        "efficiency": f"{r.peak.family}, {r.efficiency.source}",
        "highestConcurrencyAtSlo": best,
        "levels": [
            level_row(at if at is not None and n == best else predict(r, Workload(n, prompt, output))) for n in levels
        ],
    }
