"""plan.md's capacity table: per model with a `load`, the replicas and GPUs its SLO needs at peak and trough.

The numbers are the stack output `sizing[].capacity` (planner/capacity.py, from the performance model of
planner/perf_model.py); a model the performance model does not cover shows why instead of a number.
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
            "(planner/perf_model.py); the plan does not change the deployed replicas from these figures."
        ),
        "",
    ]
    return out
