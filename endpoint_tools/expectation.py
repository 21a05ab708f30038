"""The plan's prediction against a load sweep's measurement, per concurrency level.

A prediction comes from plan.json (`models[].prediction`, written at plan time by
planner/sweep_prediction.py: TTFT mean and p95, TPOT, output tokens/s per level, the SLO and the
highest concurrency predicted to meet it), from the verification Job's targets file (the same
object), or from explicit values on the load sweep's command line. `compare` sets it beside the
measured levels (endpoint_tools/load_report.py):

- per level: TTFT mean and p95, TPOT (and the ITL median beside it; the model predicts one decode
  step, which is both) and output tokens per second, each with the error
  (predicted - measured) / measured in %: positive when the model is optimistic about speed for
  tokens/s, pessimistic for latencies;
- the highest concurrency meeting the SLO (TTFT p95 and TPOT median within the thresholds, no failed
  request, the first breaking level ends it), predicted against measured, and whether the two are
  within one step of the sweep's levels (undecided when every level met: the measured is a lower bound).

Standard library only: the verification Job runs it from a plain Python image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from common.untrusted import InputLimitError, excerpt, loads_json
from endpoint_tools.load_report import LevelResult

MAX_PLAN_JSON_BYTES = 64 * 1024 * 1024
MAX_LEVELS = 1024
MAX_MS = 1e9
MAX_TPS = 1e9
LEVEL_KEYS = {"ttftMeanMs": "ttft_mean_ms", "ttftP95Ms": "ttft_p95_ms", "tpotMs": "tpot_ms"}
PREFIX = "expected: "


class ExpectationError(ValueError):
    """The prediction cannot be used; one line naming the flag (or field) and the fix."""


@dataclass(frozen=True)
class LevelExpectation:
    concurrency: int
    ttft_mean_ms: float | None = None
    ttft_p95_ms: float | None = None
    tpot_ms: float | None = None
    output_tokens_per_s: float | None = None


@dataclass(frozen=True)
class Expectation:
    source: str
    levels: dict[int, LevelExpectation] = field(default_factory=dict)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    highest: int | None = None  # the highest concurrency predicted to meet the SLO

    def at(self, concurrency: int) -> LevelExpectation | None:
        return self.levels.get(concurrency)


def _number(value: object, where: str, high: float, *, whole: bool = False, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ExpectationError(f"{where} must be a finite number, not {excerpt(value, 40)}")
    if whole and value != int(value):
        raise ExpectationError(f"{where} must be a whole number, not {excerpt(value, 40)}")
    if not low <= value <= high:
        raise ExpectationError(f"{where} must be from {low:g} to {high:g}, not {excerpt(value, 40)}")
    return float(value)


def _optional(doc: dict, key: str, where: str, high: float, *, whole: bool = False, low: float = 0.0):
    value = doc.get(key)
    return None if value is None else _number(value, f"{where}.{key}", high, whole=whole, low=low)


def parse_prediction(doc: object, where: str, source: str) -> Expectation:
    """A `prediction` object (plan.json's models[].prediction, a targets file's sweep.prediction)."""
    if not isinstance(doc, dict):
        raise ExpectationError(f"{where} must be an object")
    if doc.get("predicted") is not True:
        reason = doc.get("notPredicted")
        why = excerpt(reason, 200) if isinstance(reason, str) else "no reason given"
        raise ExpectationError(f"{where}: the plan did not predict this model ({why})")
    levels_doc = doc.get("levels")
    if not isinstance(levels_doc, list) or not 1 <= len(levels_doc) <= MAX_LEVELS:
        raise ExpectationError(f"{where}.levels must be a list of 1 to {MAX_LEVELS} levels")
    levels: dict[int, LevelExpectation] = {}
    for n, entry in enumerate(levels_doc):
        at = f"{where}.levels[{n}]"
        if not isinstance(entry, dict):
            raise ExpectationError(f"{at} must be an object")
        concurrency = int(_number(entry.get("concurrency"), f"{at}.concurrency", MAX_LEVELS * 64, whole=True, low=1))
        if concurrency in levels:
            raise ExpectationError(f"{at}.concurrency {concurrency} is listed twice")
        values = {attr: _optional(entry, key, at, MAX_MS) for key, attr in LEVEL_KEYS.items()}
        tps = _optional(entry, "outputTokensPerSecond", at, MAX_TPS)
        levels[concurrency] = LevelExpectation(concurrency, output_tokens_per_s=tps, **values)
    highest = _optional(doc, "highestConcurrencyAtSlo", where, MAX_LEVELS * 64, whole=True)
    prompt = _optional(doc, "promptTokens", where, 2**24, whole=True, low=1)
    output = _optional(doc, "outputTokens", where, 2**24, whole=True, low=1)
    return Expectation(
        source=source,
        levels=levels,
        prompt_tokens=None if prompt is None else int(prompt),
        output_tokens=None if output is None else int(output),
        ttft_slo_ms=_optional(doc, "ttftSloMs", where, MAX_MS),
        tpot_slo_ms=_optional(doc, "itlSloMs", where, MAX_MS),
        highest=None if highest is None else int(highest),
    )


def from_plan_json(text: str, model: str | None, flag: str = "--expect-from-plan") -> Expectation:
    """The prediction of `model` (or of the plan's only predicted model) in plan.json's text."""
    fix = "run `make plan` (python -m offline_plan --stack <stack>) and pass build/<stack>/plan.json"
    try:
        doc = loads_json(text, flag, max_bytes=MAX_PLAN_JSON_BYTES)
    except InputLimitError as exc:
        raise ExpectationError(f"{' '.join(str(exc).split())}; {fix}") from None
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, list) or not all(isinstance(m, dict) and isinstance(m.get("model"), str) for m in models):
        raise ExpectationError(f"{flag}: not an offline plan's plan.json (no `models` list of named models); {fix}")
    names = [m["model"] for m in models]
    shown = ", ".join(excerpt(n, 60) for n in names[:10]) or "none"
    if model is not None:
        entry = next((m for m in models if m["model"] == model), None)
        if entry is None:
            raise ExpectationError(
                f"{flag}: model {excerpt(model, 60)} is not in the plan (it has {shown}); pass --model with one of them"
            )
    else:
        predicted = [m for m in models if isinstance(m.get("prediction"), dict)]
        if len(predicted) != 1:
            raise ExpectationError(
                f"{flag}: the plan predicts {len(predicted)} models; name one with --model ({shown})"
            )
        entry = predicted[0]
    name = entry["model"]
    if entry.get("prediction") is None:
        raise ExpectationError(
            f"{flag}: the plan made no prediction for {excerpt(name, 60)}; set models[].load or "
            "models[].verification.sweep.enabled in the stack file and run `make plan` again"
        )
    try:
        return parse_prediction(entry["prediction"], f"{flag}: {name}.prediction", f"plan.json ({name})")
    except ExpectationError as exc:
        raise ExpectationError(f"{exc}; {fix}") from None


def from_values(
    concurrency: list[int],
    values: dict[str, list[float] | None],
    *,
    highest: int | None = None,
    ttft_slo_ms: float | None = None,
    tpot_slo_ms: float | None = None,
) -> Expectation:
    """Explicit values: flag -> one value for every level, or one per level of --concurrency."""
    attrs = {
        "--expect-ttft-ms": "ttft_mean_ms",
        "--expect-ttft-p95-ms": "ttft_p95_ms",
        "--expect-tpot-ms": "tpot_ms",
        "--expect-output-tps": "output_tokens_per_s",
    }
    per_level: dict[int, dict[str, float]] = {n: {} for n in concurrency}
    for flag, given in values.items():
        if given is None:
            continue
        if len(given) not in (1, len(concurrency)):
            raise ExpectationError(
                f"{flag}: {len(given)} values for {len(concurrency)} --concurrency levels; give one value, "
                f"or one per level in the order of --concurrency"
            )
        for n, value in zip(concurrency, given * len(concurrency) if len(given) == 1 else given, strict=False):
            per_level[n][attrs[flag]] = value
    levels = {n: LevelExpectation(n, **v) for n, v in per_level.items() if v}
    return Expectation("command line", levels, None, None, ttft_slo_ms, tpot_slo_ms, highest)


def missing_levels(expectation: Expectation, concurrency: list[int]) -> list[int]:
    return [n for n in concurrency if n not in expectation.levels]


def _err(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured <= 0:
        return None
    return round((predicted - measured) / measured * 100, 1)


def meets(level: LevelResult, ttft_slo_ms: float | None, tpot_slo_ms: float | None) -> bool:
    """Every request completed, the TTFT p95 and the TPOT median within their thresholds."""
    if level.errors or level.not_started or not level.completed:
        return False
    ttft, tpot = level.ttft_ms.get("p95"), level.tpot_ms.get("p50")
    if ttft_slo_ms is not None and (ttft is None or ttft > ttft_slo_ms):
        return False
    return not (tpot_slo_ms is not None and (tpot is None or tpot > tpot_slo_ms))


def measured_highest(levels: list[LevelResult], ttft_slo_ms: float | None, tpot_slo_ms: float | None) -> int | None:
    best = None
    for level in sorted(levels, key=lambda lv: lv.concurrency):
        if not meets(level, ttft_slo_ms, tpot_slo_ms):
            break
        best = level.concurrency
    return best


def within_one_step(predicted: int, measured: int | None, sweep: list[int]) -> bool | None:
    """Whether the predicted highest concurrency is within one step of the sweep's levels from the measured one.

    Both are placed on the sweep's levels: the predicted at the highest level at or below it (-1 below
    the first, one past the last above it), the measured at its level (-1: even the first missed).
    Within one step: the positions differ by at most one. When every level met the SLO the measured
    figure is only a lower bound, so the answer is None (undecided: sweep higher) unless the prediction
    is already two or more steps below it (False).
    """
    ordered = sorted(set(sweep))
    if predicted > ordered[-1]:
        pos_pred = len(ordered)
    else:
        pos_pred = max((i for i, n in enumerate(ordered) if n <= predicted), default=-1)
    pos_meas = ordered.index(measured) if measured in ordered else -1
    if measured is not None and measured == ordered[-1]:
        return False if pos_meas - pos_pred >= 2 else None
    return abs(pos_pred - pos_meas) <= 1


def compare(expectation: Expectation, levels: list[LevelResult]) -> dict[str, Any]:
    """The JSON form: one row per measured level with a prediction, and the SLO concurrency line."""
    rows = []
    for level in sorted(levels, key=lambda lv: lv.concurrency):
        e = expectation.at(level.concurrency)
        if e is None:
            continue
        measured = {
            "ttft_mean_ms": level.ttft_mean_ms,
            "ttft_p95_ms": level.ttft_ms.get("p95"),
            "tpot_ms": level.tpot_ms.get("p50"),
            "itl_ms": level.itl_ms.get("p50"),
            "output_tokens_per_s": level.output_tokens_per_s if level.completed else None,
        }
        predicted = {
            "ttft_mean_ms": e.ttft_mean_ms,
            "ttft_p95_ms": e.ttft_p95_ms,
            "tpot_ms": e.tpot_ms,
            "itl_ms": e.tpot_ms,
            "output_tokens_per_s": e.output_tokens_per_s,
        }
        rows.append(
            {
                "concurrency": level.concurrency,
                "predicted": predicted,
                "measured": measured,
                "error_percent": {k: _err(predicted[k], measured[k]) for k in predicted},
            }
        )
    slo: dict[str, Any] | None = None
    if expectation.ttft_slo_ms is not None or expectation.tpot_slo_ms is not None:
        sweep = [lv.concurrency for lv in levels]
        best = measured_highest(levels, expectation.ttft_slo_ms, expectation.tpot_slo_ms)
        slo = {
            "ttft_p95_ms": expectation.ttft_slo_ms,
            "tpot_p50_ms": expectation.tpot_slo_ms,
            "predicted_highest_concurrency": expectation.highest,
            "measured_highest_concurrency": best,
            "every_level_met": best is not None and best == max(sweep),
            "within_one_step": None
            if expectation.highest is None
            else within_one_step(expectation.highest, best, sweep),
        }
    return {"source": expectation.source, "levels": rows, "slo": slo}


def _pair(row: dict[str, Any], key: str, unit: str, digits: int) -> str:
    p, m, e = row["predicted"][key], row["measured"][key], row["error_percent"][key]
    if p is None:
        return ""
    shown = "-" if m is None else f"{m:.{digits}f}"
    return f"{p:.{digits}f}/{shown}{unit}" + ("" if e is None else f" ({e:+.1f}%)")


def lines(report: dict[str, Any]) -> list[str]:
    """Text lines: one per level, predicted/measured (error), then the SLO concurrency."""
    out = [f"predicted/measured ({report['source']}); error = (predicted - measured) / measured"]
    for row in report["levels"]:
        cells = [
            ("TTFT mean", _pair(row, "ttft_mean_ms", " ms", 1)),
            ("TTFT p95", _pair(row, "ttft_p95_ms", " ms", 1)),
            ("TPOT p50", _pair(row, "tpot_ms", " ms", 2)),
            ("ITL p50", _pair(row, "itl_ms", " ms", 2)),
            ("out tok/s", _pair(row, "output_tokens_per_s", "", 1)),
        ]
        out.append(f"  concurrency {row['concurrency']}: " + ", ".join(f"{k} {v}" for k, v in cells if v))
    if not report["levels"]:
        out.append("  no measured level has a prediction")
    slo = report["slo"]
    if slo is not None:
        target = " and ".join(
            t
            for t in (
                f"TTFT p95 <= {slo['ttft_p95_ms']:g} ms" if slo["ttft_p95_ms"] is not None else "",
                f"TPOT p50 <= {slo['tpot_p50_ms']:g} ms" if slo["tpot_p50_ms"] is not None else "",
            )
            if t
        )
        measured = slo["measured_highest_concurrency"]
        predicted_known = slo["predicted_highest_concurrency"] is not None
        shown = (
            "none"
            if measured is None
            else f"{measured}" + (" (every level met: at least)" if slo["every_level_met"] else "")
        )
        verdict = {
            True: "within one sweep step",
            False: "NOT within one sweep step",
            None: "undecided: every level met, sweep higher" if predicted_known else "no prediction",
        }[slo["within_one_step"]]
        predicted = slo["predicted_highest_concurrency"]
        out.append(
            f"  highest concurrency meeting {target}: predicted {'-' if predicted is None else predicted}, "
            f"measured {shown}: {verdict}"
        )
    return out
