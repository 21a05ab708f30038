"""plan.md's capacity table: per model with a `load`, the replicas and GPUs its SLO needs at peak and trough.

The numbers are the stack output `sizing[].capacity` (planner/capacity.py, from the performance model of
planner/perf_model.py); a model the performance model does not cover shows why instead of a number. After it:
which deployed values the plan derived from the load, and from what (models' replicas and queue thresholds,
pools' node counts), and the GPU-hours per day and their cost, "unresolved" with the
command that reads the price where common/gpu_prices.py has none.
"""

from __future__ import annotations

from typing import Any

COLUMNS = (
    "| model | load (requests/s peak / trough) | prompt / output tokens (mean) | SLO (TTFT, inter-token) | "
    "concurrency per replica at the SLO | replicas at peak / trough | GPUs at peak / trough | "
    "predicted TTFT p95 / TPOT | efficiencies |"
)


def _cell(row: dict[str, Any], c: dict[str, Any]) -> str:
    head = (
        f"| {row['model']} | {c['peakRequestsPerSecond']:g} / {c['troughRequestsPerSecond']:g} | "
        f"{c['promptTokens']:,} / {c['outputTokens']:,} | {c['ttftSloMs']:g} ms, {c['itlSloMs']:g} ms | "
    )
    if not c["predicted"]:
        return head + f"not predicted: {c['notPredicted']} | - | - | - | - |"
    return head + (
        f"{c['concurrencyPerReplica']} ({c['requestsPerSecondPerReplica']:g} requests/s) | "
        f"{c['replicasAtPeak']} / {c['replicasAtTrough']} | {c['gpusAtPeak']} / {c['gpusAtTrough']} | "
        f"{c['ttftP95Ms']:,.0f} ms / {c['tpotMs']:.1f} ms | {c['efficiency']} |"
    )


COST_COLUMNS = (
    "| model | daily shape | replicas running at peak / trough | GPU-hours per day | price per GPU-hour | "
    "cost per hour at peak / trough | cost per day | per million output tokens |"
)


def _usd(v: Any) -> str:
    return "unresolved" if v is None else f"${v:,.2f}"


def _cost_cell(row: dict[str, Any], c: dict[str, Any]) -> str:
    hours = c["peakHoursPerDay"]
    shape = f"{hours:g} h at peak, {24 - hours:g} h at trough"
    per_million = (
        "unresolved" if c["costPerMillionOutputTokens"] is None else f"${c['costPerMillionOutputTokens']:,.4f}"
    )
    per_gpu = "unresolved" if c["usdPerGpuHour"] is None else f"${c['usdPerGpuHour']:,.4f}"
    return (
        f"| {row['model']} | {shape} | {c['replicasRunningAtPeak']} / {c['replicasRunningAtTrough']} | "
        f"{c['gpuHoursPerDay']:g} | {per_gpu} | {_usd(c['costPerHourAtPeak'])} / {_usd(c['costPerHourAtTrough'])} | "
        f"{_usd(c['costPerDay'])} | {per_million} |"
    )


def _derived_lines(rows: list[dict[str, Any]], loaded: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    derived = [d for _, c in loaded for d in c.get("derived") or []]
    # A pool's derivation is on every model of the pool: once each.
    pools = {d["key"]: d for row in rows for d in row.get("poolDerivedFromLoad") or []}
    derived += [pools[k] for k in sorted(pools)]
    if not derived:
        return [
            (
                "The plan derived no deployed value from the loads: every replica count, queue threshold and node "
                "count the capacity touches is set in the stack file (a set value short of the peak is a warning)."
            ),
            "",
        ]
    return [
        "#### Deployed from the load",
        "",
        "The stack file leaves these unset, so the plan deploys what the load needs at the SLO:",
        "",
        "| key | value | derived from |",
        "|---|---|---|",
        *(f"| `{d['key']}` | {d['value']:g} | {d['from']} |" for d in derived),
        "",
    ]


def _price_lines(loaded: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    notes = sorted({c["price"] for _, c in loaded if c.get("price")})
    return [f"- {note}" for note in notes] + ([""] if notes else [])


def capacity_section(rows: list[dict[str, Any]]) -> list[str]:
    """The "Capacity at the SLO" section of plan.md, in the sizing table's order (deterministic)."""
    out = ["### Capacity at the SLO", ""]
    loaded = [(row, row["capacity"]) for row in rows if isinstance(row.get("capacity"), dict)]
    if not loaded:
        return [
            *out,
            "No model sets `models[].load`; set it to derive the replicas its `slo` needs (docs/capacity.md).",
            "",
        ]
    out += [
        COLUMNS,
        "|---|---|---|---|---|---|---|---|---|",
        *(_cell(row, c) for row, c in loaded),
        "",
        (
            "Each replica runs at the highest concurrency whose predicted TTFT p95 and TPOT meet the thresholds of "
            "`models[].slo` (the objective counts a share of requests; the model predicts the mean TPOT and the "
            "TTFT p95), at the mean prompt and output lengths; the replicas divide the load by the rate one "
            "replica serves there. Prefill's compute efficiency is an assumption, not calibrated "
            "(planner/perf_model.py)."
        ),
        "",
    ]
    out += _derived_lines(rows, loaded)
    predicted = [(row, c) for row, c in loaded if c["predicted"] and c.get("gpuHoursPerDay") is not None]
    if predicted:
        out += [
            "#### GPU-hours and cost per day",
            "",
            COST_COLUMNS,
            "|---|---|---|---|---|---|---|---|",
            *(_cost_cell(row, c) for row, c in predicted),
            "",
            (
                "The day is two levels (`load.peakHoursPerDay` hours at the peak rate, the rest at the trough rate; "
                "default 24 h at peak, the upper bound); the replicas running are the load's at each level within "
                "the deployed minimum and maximum. A GPU-hour is the pool machine's hourly price over its GPUs "
                "(common/gpu_prices.py); per million output tokens is the day's cost over the day's output tokens. "
                "Prices:"
            ),
            "",
            *_price_lines(predicted),
        ]
    return out
