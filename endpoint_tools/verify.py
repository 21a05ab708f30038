"""Verify every model of a stack, in the cluster: the smoke checks per model, with the plan's numbers.

    python -m endpoint_tools.verify --targets targets.json

The stack's verification Job (components/verification/) runs this with the targets file the program
writes from the plan: for each model, its in-cluster Service, the names it serves (the model and
its LoRA adapters), the max-model-len and the KV-cache tokens the planner predicted. Each model gets
the smoke checks of `python -m components.smoke` (endpoint_tools/smoke.py: health, models, chat,
stream, context, metrics, kv, template, golden, names), printed as smoke prints them, then one
`calibration:` line (JSON: the predicted and the actual KV-cache tokens with what decided them, the
pair a user sends back as a calibration case; docs/verification.md), for a model without a golden
record one `golden-record:` line (JSON: the record to commit as golden/<model>.json;
endpoint_tools/golden.py), for a model with a `sweep` entry (models[].verification.sweep) a short load sweep
(endpoint_tools/loadtest.py) reported against the plan's prediction (endpoint_tools/expectation.py) and one
`sweep:` line (JSON; a measurement: it never changes the exit status) and, at the end, one `verify-summary:`
line (JSON).

Exit status as smoke's: 0 every model passed; 1 a check failed or a server could not be reached;
2 an unusable targets file; 3 the only failures are KV-cache capacities below the plan's; 4 the only
failures are golden answers differing from their record where config asks for exact agreement.

Standard library only: the Job runs it from a plain Python image with this package mounted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field

from common.untrusted import InputLimitError, excerpt, loads_json, read_text_file
from endpoint_tools import expectation, golden, kv_capacity, loadtest, smoke
from endpoint_tools.load_dist import parse_distribution
from endpoint_tools.load_report import format_table
from endpoint_tools.openai_client import Client, EndpointError

MAX_TARGETS_BYTES = 1024 * 1024
MAX_TARGETS = 256
# Calibration context copied through as given: short scalars only.
MAX_CONTEXT_KEYS = 32
SUMMARY_PREFIX = "verify-summary: "
CALIBRATION_PREFIX = "calibration: "
GOLDEN_RECORD_PREFIX = golden.LOG_PREFIX
GOLDEN_MODES = ("report", "exact")
SWEEP_PREFIX = "sweep: "
MAX_SWEEP_LEVELS = 8
MAX_SWEEP_CONCURRENCY = 256
MAX_SWEEP_REQUESTS = 256


class TargetsError(ValueError):
    """The targets file cannot be used; one line saying which field and why."""


@dataclass(frozen=True)
class Target:
    model: str
    base_url: str
    names: tuple[str, ...]
    max_model_len: int | None
    expect_kv_tokens: int | None
    api_key_env: str | None
    request_timeout: float
    total_timeout: float
    context: dict[str, object] = field(default_factory=dict)
    # Special tokens the rendered chat must contain (none: the template check only sees it render).
    template_tokens: tuple[str, ...] = ()
    # The golden check: "report" or "exact" against `golden_record`; without a record the answers
    # are recorded and printed; None skips the check.
    golden_mode: str | None = None
    golden_key: dict[str, str] = field(default_factory=dict)
    golden_record: golden.Record | None = None
    sweep: Sweep | None = None


@dataclass(frozen=True)
class Sweep:
    """A short load sweep after the checks (models[].verification.sweep), against the plan's prediction."""

    concurrency: tuple[int, ...]
    requests_per_level: int
    prompt_tokens: int
    output_tokens: int
    # None: the plan did not predict this model (`not_predicted` says why); the sweep still measures.
    expected: expectation.Expectation | None
    not_predicted: str | None = None


def _sweep(value: object, where: str) -> Sweep | None:
    """The targets file's sweep entry: {concurrency, requestsPerLevel, promptTokens, outputTokens, prediction}."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TargetsError(f"{where} must be an object")
    levels = value.get("concurrency")
    if (
        not isinstance(levels, list)
        or not 1 <= len(levels) <= MAX_SWEEP_LEVELS
        or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_SWEEP_CONCURRENCY for n in levels)
        or levels != sorted(set(levels))
    ):
        raise TargetsError(
            f"{where}.concurrency must be 1 to {MAX_SWEEP_LEVELS} increasing whole numbers from 1 to "
            f"{MAX_SWEEP_CONCURRENCY}"
        )
    requests = _field(value, "requestsPerLevel", int, where, low=1, high=MAX_SWEEP_REQUESTS)
    prompt = _field(value, "promptTokens", int, where, low=1, high=smoke.MAX_CONTEXT_CHECKED)
    output = _field(value, "outputTokens", int, where, low=1, high=smoke.MAX_CONTEXT_CHECKED)
    prediction = value.get("prediction")
    expected, reason = None, None
    if isinstance(prediction, dict) and prediction.get("predicted") is False:
        reason = excerpt(prediction.get("notPredicted"), 300) if prediction.get("notPredicted") else "no reason given"
    elif prediction is not None:
        try:
            expected = expectation.parse_prediction(prediction, f"{where}.prediction", "the plan")
        except expectation.ExpectationError as exc:
            raise TargetsError(str(exc)) from None
        missing = expectation.missing_levels(expected, levels)
        if missing:
            raise TargetsError(f"{where}.prediction has no level {missing[0]} of {where}.concurrency")
    return Sweep(tuple(levels), requests, prompt, output, expected, reason)


def _field(entry: dict, key: str, kind: type, where: str, *, required: bool = True, low=None, high=None):
    value = entry.get(key)
    if value is None:
        if required:
            raise TargetsError(f"{where}.{key} is missing")
        return None
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TargetsError(f"{where}.{key} must be a number, not {excerpt(value, 40)}")
    if kind is int and value != int(value):
        raise TargetsError(f"{where}.{key} must be a whole number, not {excerpt(value, 40)}")
    if kind is str and (not isinstance(value, str) or not value or len(value) > 2048):
        raise TargetsError(f"{where}.{key} must be a non-empty string of at most 2,048 characters")
    if low is not None and not low <= value <= high:
        raise TargetsError(f"{where}.{key} must be from {low:,} to {high:,}, not {excerpt(value, 40)}")
    return kind(value)


def parse_targets(text: str) -> tuple[list[Target], float]:
    """The targets and the KV tolerance (a fraction) from the file's text, or TargetsError."""
    try:
        doc = loads_json(text, "the targets file", max_bytes=MAX_TARGETS_BYTES)
    except InputLimitError as exc:
        raise TargetsError(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        raise TargetsError("the targets file must be an object with a `targets` list")
    if not 1 <= len(doc["targets"]) <= MAX_TARGETS:
        raise TargetsError(f"the targets file lists {len(doc['targets'])} targets; 1 to {MAX_TARGETS} are read")
    tolerance = _field(doc, "kvTolerancePercent", float, "targets file", required=False, low=0, high=99.9)
    targets = []
    for i, entry in enumerate(doc["targets"]):
        where = f"targets[{i}]"
        if not isinstance(entry, dict):
            raise TargetsError(f"{where} must be an object")
        names = entry.get("names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in names):
            raise TargetsError(f"{where}.names must be a list of names")
        template_tokens = entry.get("templateTokens") or []
        if not isinstance(template_tokens, list) or not all(
            isinstance(t, str) and 0 < len(t) <= 256 for t in template_tokens
        ):
            raise TargetsError(f"{where}.templateTokens must be a list of token strings")
        context = entry.get("calibration") or {}
        if (
            not isinstance(context, dict)
            or len(context) > MAX_CONTEXT_KEYS
            or not all(isinstance(v, (str, int, float, bool)) or v is None for v in context.values())
        ):
            raise TargetsError(f"{where}.calibration must be an object of at most {MAX_CONTEXT_KEYS} plain values")
        golden_mode, golden_key, golden_record = _golden(entry.get("golden"), f"{where}.golden")
        targets.append(
            Target(
                model=_field(entry, "model", str, where),
                base_url=_field(entry, "baseUrl", str, where),
                names=tuple(names),
                max_model_len=_field(
                    entry,
                    "maxModelLen",
                    int,
                    where,
                    required=False,
                    low=smoke.OUTPUT_BUDGET + 2,
                    high=smoke.MAX_CONTEXT_CHECKED,
                ),
                expect_kv_tokens=_field(
                    entry, "expectKvTokens", int, where, required=False, low=1, high=smoke.MAX_KV_TOKENS
                ),
                api_key_env=_field(entry, "apiKeyEnv", str, where, required=False),
                request_timeout=_field(entry, "requestTimeoutSeconds", float, where, low=1, high=86400),
                total_timeout=_field(entry, "totalTimeoutSeconds", float, where, low=1, high=86400),
                context=context,
                template_tokens=tuple(template_tokens),
                golden_mode=golden_mode,
                golden_key=golden_key,
                golden_record=golden_record,
                sweep=_sweep(entry.get("sweep"), f"{where}.sweep"),
            )
        )
        if golden_record is not None and golden_record.model != targets[-1].model:
            raise TargetsError(
                f"{where}.golden.record is of model {excerpt(golden_record.model, 60)}, "
                f"not {excerpt(targets[-1].model, 60)}"
            )
    return targets, (kv_capacity.DEFAULT_TOLERANCE if tolerance is None else tolerance / 100)


def _golden(value: object, where: str) -> tuple[str | None, dict[str, str], golden.Record | None]:
    """The golden entry of a target: {mode: report|exact, key: {...}, record: {...} or null}."""
    if value is None:
        return None, {}, None
    if not isinstance(value, dict) or value.get("mode") not in GOLDEN_MODES:
        raise TargetsError(f"{where} must be an object whose mode is one of {', '.join(GOLDEN_MODES)}")
    key = value.get("key") or {}
    if (
        not isinstance(key, dict)
        or set(key) - set(golden.KEY_FIELDS)
        or not all(v is None or (isinstance(v, str) and 0 < len(v) <= golden.MAX_KEY_CHARS) for v in key.values())
    ):
        raise TargetsError(
            f"{where}.key must be an object of {', '.join(golden.KEY_FIELDS)}, each a short string or null"
        )
    record = None
    if value.get("record") is not None:
        try:
            record = golden.parse_record(value["record"], f"{where}.record")
        except golden.GoldenError as exc:
            raise TargetsError(str(exc)) from None
    return value["mode"], {k: v for k, v in key.items() if v is not None}, record


@dataclass
class ModelReport:
    model: str
    status: int
    failed: list[str]
    verdict: kv_capacity.Verdict | None
    # "recorded" (no record yet), "identical" or "differs", with the key fields that changed.
    golden: dict[str, object] | None = None
    # The load sweep's predicted-against-measured report (endpoint_tools/expectation.py), when it ran.
    sweep: dict[str, object] | None = None

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "status": {
                smoke.EXIT_PASSED: "passed",
                smoke.EXIT_KV_SHORTFALL: "kv-shortfall",
                smoke.EXIT_GOLDEN_DIFFERS: "golden-differs",
            }.get(self.status, "failed"),
            "failed": self.failed,
        }
        if self.verdict is not None:
            out.update(
                predictedKvTokens=self.verdict.predicted,
                actualKvTokens=self.verdict.actual,
                kvErrorPercent=round(self.verdict.error * 100, 2),
            )
        if self.golden is not None:
            out["golden"] = self.golden
        if self.sweep is not None:
            out["sweep"] = self.sweep
        return out


def verify_target(target: Target, tolerance: float) -> ModelReport:
    print(f"== {target.model}  {target.base_url}", flush=True)
    api_key = None
    if target.api_key_env:
        api_key = os.environ.get(target.api_key_env)
        if not api_key:
            print(f"FAIL  setup    environment variable {target.api_key_env} (the API key) is not set or empty")
            return ModelReport(target.model, smoke.EXIT_FAILED, ["setup"], None)
    try:
        client = Client(
            target.base_url,
            api_key=api_key,
            timeout=target.request_timeout,
            deadline=time.monotonic() + target.total_timeout,
        )
        client.get("/health", timeout=min(target.request_timeout, 10.0))
    except (ValueError, EndpointError) as exc:
        print(f"FAIL  reach    cannot reach {target.base_url}: {' '.join(str(exc).split())}")
        return ModelReport(target.model, smoke.EXIT_FAILED, ["reach"], None)
    ctx = smoke.SmokeContext(
        client,
        target.model,
        target.max_model_len,
        names=target.names,
        expect_kv_tokens=target.expect_kv_tokens,
        kv_tolerance=tolerance,
        check_template=True,
        template_tokens=target.template_tokens,
        golden_mode=(target.golden_mode if target.golden_record else "record") if target.golden_mode else None,
        golden_record=target.golden_record,
        golden_key=target.golden_key,
    )
    results = smoke.run_checks(ctx)
    for result in results:
        print(result.line())
    status = smoke.summarize(results)
    report = ModelReport(
        target.model, status, [r.name for r in results if not r.passed], ctx.kv_verdict, _golden_summary(ctx)
    )
    if ctx.kv_verdict is not None:
        print(
            CALIBRATION_PREFIX
            + json.dumps(
                {
                    "model": target.model,
                    **target.context,
                    "predictedKvTokens": ctx.kv_verdict.predicted,
                    "actualKvTokens": ctx.kv_verdict.actual,
                    "errorPercent": round(ctx.kv_verdict.error * 100, 2),
                },
                sort_keys=False,
            )
        )
    cmp = ctx.golden_comparison
    if ctx.golden_live is not None and (cmp is None or not cmp.identical or cmp.key_changes):
        # No record yet (the first rollout), or the answers or the key changed: the record to commit
        # as golden/<model>.json once the change is judged fine (python -m endpoint_tools.golden save).
        print(golden.LOG_PREFIX + json.dumps(ctx.golden_live.as_json(), ensure_ascii=True))
    if target.sweep is not None:
        if status in (smoke.EXIT_PASSED, smoke.EXIT_KV_SHORTFALL, smoke.EXIT_GOLDEN_DIFFERS):
            report.sweep = run_sweep(client, target.model, target.sweep, target.request_timeout)
        else:
            print("sweep    skipped: a check failed, so the model's figures would not mean what they say")
            report.sweep = {"skipped": "a check failed"}
    sys.stdout.flush()
    return report


def run_sweep(client: Client, model: str, sweep: Sweep, request_timeout: float) -> dict[str, object]:
    """The load sweep of endpoint_tools/loadtest.py at the sweep's levels, then predicted against measured.

    A measurement, not a check: it never changes the exit status. Its deadline is the client's (the
    target's total timeout, which the program sized to hold the sweep)."""
    rng = random.Random(0)
    prompts, outputs = (parse_distribution(f"fixed:{n}") for n in (sweep.prompt_tokens, sweep.output_tokens))
    deadline = client.deadline if client.deadline is not None else time.monotonic() + request_timeout
    try:
        source = loadtest.PromptSource(client, model, rng, sweep.prompt_tokens)
    except EndpointError as exc:
        print(f"sweep    could not prepare prompts: {' '.join(str(exc).split())}")
        return {"error": str(exc)[:300]}
    loadtest.measure(client, model, loadtest.PlannedRequest(source.prompt(8), 8, 4), deadline, request_timeout)
    progress = loadtest.Progress(sweep.requests_per_level * len(sweep.concurrency))
    levels = []
    for n in sweep.concurrency:
        planned = loadtest.plan_requests(source, rng, sweep.requests_per_level, prompts, outputs)
        levels.append(loadtest.run_level(client, model, n, planned, deadline, request_timeout, progress))
    progress.close()
    print(f"sweep    {sweep.requests_per_level} requests per level, prompt {prompts}, output {outputs}")
    print(format_table(levels))
    result: dict[str, object] = {"levels": [lv.to_json() for lv in levels], "promptLengthsExact": source.exact}
    if sweep.expected is None:
        print(f"sweep    not predicted by the plan: {sweep.not_predicted}")
        print(SWEEP_PREFIX + json.dumps({"model": model, **result, "notPredicted": sweep.not_predicted}))
        return {"notPredicted": sweep.not_predicted}
    compared = expectation.compare(sweep.expected, levels)
    print("\n".join(expectation.lines(compared)))
    print(SWEEP_PREFIX + json.dumps({"model": model, **result, "expectation": compared}))
    # The summary keeps the errors and the SLO line; the `sweep:` line above has every figure.
    return {
        "errorPercent": {str(row["concurrency"]): row["error_percent"] for row in compared["levels"]},
        "slo": compared["slo"],
    }


def _golden_summary(ctx: smoke.SmokeContext) -> dict[str, object] | None:
    if ctx.golden_recorded is not None:
        return {"result": "recorded"}
    if ctx.golden_comparison is None:
        return None
    cmp = ctx.golden_comparison
    return {
        "result": "identical" if cmp.identical else "differs",
        "compared": cmp.compared,
        "differing": [d.prompt for d in cmp.diffs],
        "keyChanges": [f for f, _, _ in cmp.key_changes],
    }


def overall(reports: list[ModelReport]) -> int:
    if all(r.status == smoke.EXIT_PASSED for r in reports):
        return smoke.EXIT_PASSED
    failing = {r.status for r in reports if r.status != smoke.EXIT_PASSED}
    return failing.pop() if failing in ({smoke.EXIT_KV_SHORTFALL}, {smoke.EXIT_GOLDEN_DIFFERS}) else smoke.EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m endpoint_tools.verify",
        description="Run the smoke checks against every model of a stack, with the plan's numbers.",
        epilog="exit status: 0 every model passed; 1 a check failed; 2 unusable targets file; "
        "3 the only failures are KV-cache capacities below the plan's; "
        "4 the only failures are golden answers differing from their record (exact mode)",
    )
    parser.add_argument("--targets", required=True, help="the JSON targets file the program writes")
    args = parser.parse_args(argv)
    try:
        targets, tolerance = parse_targets(read_text_file(args.targets, MAX_TARGETS_BYTES, "the targets file"))
    except (TargetsError, InputLimitError, OSError) as exc:
        parser.error(" ".join(str(exc).split()))
    reports = [verify_target(t, tolerance) for t in targets]
    status = overall(reports)
    passed = sum(r.status == smoke.EXIT_PASSED for r in reports)
    print(f"== verify: {passed}/{len(reports)} models passed")
    print(
        SUMMARY_PREFIX
        + json.dumps(
            {
                "passed": status == smoke.EXIT_PASSED,
                "exitStatus": status,
                "models": {r.model: r.summary() for r in reports},
            }
        )
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
