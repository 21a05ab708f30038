"""Latency SLOs of one served model: recording rules per window and multi-window burn-rate alerts.

An SLO here is "`objective` of the observations of a vLLM histogram fall within `seconds`", for
time to first token (is the answer starting?) and inter-token latency (is it streaming smoothly?).
The error ratio over a window is the share of observations above the threshold:

    1 - rate(<histogram>_bucket{le="<seconds>"}[w]) / rate(<histogram>_count[w])

recorded per window (`model:<sli>_slo_errors:ratio_rate<w>`, labels namespace and model_name), and
the alerts compare the recorded ratios with burn-rate x error budget for the window pairs of
common.alerting.BURN_WINDOWS (1h/5m and 6h/30m page, 3d/6h tickets). The threshold is validated in
config to be one of the histogram's bucket bounds, the only values a cumulative bucket answers for.

Note what the histograms count: vLLM observes time to first token once per request that produced
a first token, and inter-token latency once per generated token after the first (vLLM 0.32
vllm/v1/metrics/loggers.py). A request that fails before its first token is in neither; the error
alert (components/serving/alerts.py) watches those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common import engine_metrics as m
from common.alerting import BURN_WINDOWS, PAGE, TICKET, AlertRouting, BurnWindow, alert_rule, burn_threshold
from components.serving.targets import Target
from stack_config.models import SloConfig

# Every window a rule or dashboard reads: each pair's long and short window.
RECORDED_WINDOWS: tuple[str, ...] = tuple(dict.fromkeys(w for b in BURN_WINDOWS for w in (b.short, b.long)))


@dataclass(frozen=True)
class LatencySlo:
    key: str
    """Short name in recorded series and alert names' stems."""
    title: str
    alert_stem: str
    histogram: str
    seconds: float
    objective: float

    @property
    def error_budget(self) -> float:
        # Rounded: 1 - 0.99 is 0.010000000000000009 in binary floating point.
        return round(1 - self.objective, 12)

    @property
    def description(self) -> str:
        return f"{self.objective * 100:g}% of {self.title.lower()} within {self.seconds:g}s"


TTFT = "ttft"
ITL = "itl"


def latency_slos(config: SloConfig) -> list[LatencySlo]:
    """The model's SLOs from its `slo` config section; [] when off."""
    if not config.enabled:
        return []
    ttft, itl = config.timeToFirstToken, config.interTokenLatency
    return [
        LatencySlo(
            TTFT, "Time to first token", "VllmTimeToFirstToken", m.TIME_TO_FIRST_TOKEN, ttft.seconds, ttft.objective
        ),
        LatencySlo(
            ITL, "Inter-token latency", "VllmInterTokenLatency", m.INTER_TOKEN_LATENCY, itl.seconds, itl.objective
        ),
    ]


def fast_burn_alert(slo: LatencySlo) -> str:
    return f"{slo.alert_stem}SloFastBurn"


def slow_burn_alert(slo: LatencySlo) -> str:
    return f"{slo.alert_stem}SloSlowBurn"


def le_matcher(bound: float) -> str:
    """Select the cumulative bucket of `bound`.

    The Python client writes bounds as floats (le="1.0", le="2.5"); Prometheus 3 normalises `le`
    to that form at ingestion, Prometheus 2 keeps the scraped text (and writes "1" for a protobuf
    scrape). Whole-number bounds therefore match both spellings; others have only one
    (https://prometheus.io/docs/prometheus/latest/migration/, "le and quantile label values").
    """
    if float(bound).is_integer():
        return f'le=~"{int(bound)}|{float(bound)}"'
    return f'le="{float(bound)!r}"'


def recorded_ratio(slo: LatencySlo, window: str) -> str:
    return f"model:{slo.key}_slo_errors:ratio_rate{window}"


def error_ratio_expr(t: Target, slo: LatencySlo, window: str) -> str:
    by = "sum by (namespace, model_name)"
    good = f"{by} (rate({slo.histogram}_bucket{{{t.selector}, {le_matcher(slo.seconds)}}}[{window}]))"
    total = f"{by} (rate({slo.histogram}_count{{{t.selector}}}[{window}]))"
    return f"1 - ({good} / {total})"


def recording_rules(t: Target, slos: list[LatencySlo]) -> list[dict[str, Any]]:
    return [
        {"record": recorded_ratio(slo, w), "expr": error_ratio_expr(t, slo, w)}
        for slo in slos
        for w in RECORDED_WINDOWS
    ]


def _burning(t: Target, slo: LatencySlo, window: BurnWindow) -> str:
    threshold = f"{round(burn_threshold(window, slo.objective), 12):g}"
    return (
        f"({recorded_ratio(slo, window.long)}{{{t.selector}}} > {threshold} "
        f"and {recorded_ratio(slo, window.short)}{{{t.selector}}} > {threshold})"
    )


def burn_rate_expr(t: Target, slo: LatencySlo, severity: str) -> str:
    """Any window pair of `severity` burning: both its long and its short window above the rate."""
    return " or ".join(_burning(t, slo, w) for w in BURN_WINDOWS if w.severity == severity)


def _windows_text(severity: str) -> str:
    return " or ".join(
        f"{w.burn_rate:g}x over {w.long} and {w.short} ({w.budget_spent:.0%} of the 30-day budget)"
        for w in BURN_WINDOWS
        if w.severity == severity
    )


def burn_rate_alerts(t: Target, slos: list[LatencySlo], routing: AlertRouting) -> list[dict[str, Any]]:
    rules = []
    for slo in slos:
        what = f"{t.served_name}: {slo.title.lower()} SLO ({slo.description}) is burning its error budget"
        advice = (
            "See the queue, KV-cache and preemption panels of the model's dashboard: a long queue calls for replicas "
            "(autoscaling.maxReplicas, the pool's maxNodes), a full KV cache for lower maxNumSeqs or kvCacheDtype fp8, "
            "preemptions for both; check the GPU panels for throttling or XID errors on the model's GPUs."
        )
        rules.append(
            alert_rule(
                fast_burn_alert(slo),
                burn_rate_expr(t, slo, PAGE),
                severity=PAGE,
                for_="2m",
                routing=routing,
                summary=f"{what} fast",
                description=f"Burn rate {_windows_text(PAGE)}: the budget is gone within days at this rate. {advice}",
            )
        )
        rules.append(
            alert_rule(
                slow_burn_alert(slo),
                burn_rate_expr(t, slo, TICKET),
                severity=TICKET,
                for_="1h",
                routing=routing,
                summary=f"{what} steadily",
                description=f"Burn rate {_windows_text(TICKET)}: the budget runs out before the period ends. {advice}",
            )
        )
    return rules
