"""Smoke checks for an OpenAI-compatible (vLLM) endpoint, run after `pulumi up`.

    python -m components.smoke --base-url URL --model NAME [--api-key-env VAR] [--max-model-len N]
        [--expect-kv-tokens N [--kv-tolerance PERCENT]] [--timeout SECONDS] [--total-timeout SECONDS]
    python -m components.smoke --base-url https://<host> --entrance --names NAME[,NAME...] [--api-key-env VAR]

Each check prints PASS or FAIL with its evidence; the exit status is 0 only when every check
passes, 1 when one fails (or the endpoint cannot be reached), 2 for a usage error, 3 when the only
failure is the kv check finding less KV-cache capacity than expected (the endpoint works; the plan
over-promised), 4 when the only failure is golden answers differing from the record under
--golden-exact (the endpoint works; its answers changed). Checks, in order:

  health       GET /health answers 200
  models       GET /v1/models lists the served model name
  chat         one short chat completion returns text, a finish_reason and usage
  stream       a streamed chat completion ends with `data: [DONE]`
  context      a prompt of exactly max-model-len minus the output budget succeeds with the whole
               budget; one token more is either rejected with a 4xx or served with max_tokens
               clamped so prompt + output stays within max-model-len; a prompt one token over
               max-model-len is rejected with a 4xx; /health still answers 200 afterwards (token
               counts come from the server's /tokenize, chat template included, so the boundary
               is exact; see judge_context)
  metrics      GET /metrics exposes every series the stack's alerts and autoscaler query
               (common/engine_metrics.py)
  kv           (with --expect-kv-tokens) the KV-cache tokens the server allocated (labels of
               vllm:cache_config_info on /metrics) against the expected number, e.g. the plan's
               kvCacheTokens: prints predicted, actual and the error; fails when the server holds
               less than expected by more than --kv-tolerance percent (default 10)
  template     (with --check-template or --expect-template-tokens) the chat template renders: a
               one-message chat costs more tokens than its text alone (/tokenize), and its rendered
               tokens contain each of --expect-template-tokens (e.g. <|start_header_id|>,<|eot_id|>);
               the evidence shows the rendered chat's first and last tokens
  golden       (with --record-golden or --golden) fixed greedy prompts (endpoint_tools/golden.py):
               --record-golden FILE writes their answers with the build's key (revision, engine,
               quantization, KV-cache dtype; --golden-key, the engine from GET /version when not
               given); --golden FILE compares the live answers with a record and reports which key
               fields changed and where each differing answer first differs; it passes with that
               report unless --golden-exact, which fails it when any answer differs
  names        (with --names) every model and adapter name answers a chat completion under its own
               name: through the stack's entrance this proves each reaches its base model's pool and
               that the adapter is loaded there

--entrance says the base URL is the stack's entrance (`pulumi stack output endpoints`, baseUrl
without /v1): it routes /v1 only, and GET /v1/models of one pool, so health, models, context and
metrics are skipped there (run them against each model's in-cluster Service) and chat, stream and
names run; --model defaults to the first of --names.

Bounds: --timeout seconds for each request from start to end (not per read), --total-timeout for
the whole run (every request ends by then; checks not finished fail). Answers are read within the
client's caps (endpoint_tools/openai_client.py: 32 MiB per body, 1 MiB per stream event, 100,000
events and 64 MiB per stream), and the context check builds prompts of at most 1,048,576 tokens.
Any malformed answer is a FAIL line saying what was wrong, never a traceback.

Standard library only, so it also runs as an in-cluster Job from a plain python image.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from common.engine_metrics import REQUIRED_METRICS, describe_missing, missing_names
from common.untrusted import excerpt
from endpoint_tools import golden, kv_capacity
from endpoint_tools.openai_client import (
    Client,
    EndpointError,
    Response,
    error_message,
    parse_json,
    stream_event_error,
    whole_number,
)

# Tokens asked for in the context-boundary check: the prompt is sized so prompt + budget is exactly
# max-model-len, the largest request the server must accept.
OUTPUT_BUDGET = 8
# Filler pieces tried for sizing a prompt token by token; the first that costs exactly one token per
# repetition with this tokenizer is used (most BPE vocabularies have several of these).
_FILLER_CANDIDATES = (" the", " a", " and", " of", " x", " hello", "!", ".", " 1")
# The longest context the check builds prompts for: its /tokenize answers and requests stay within
# the client's 32 MiB body cap. A server that reports more (or an absurd max_model_len) fails the
# check with the reason instead of making it build a prompt until memory runs out.
MAX_CONTEXT_CHECKED = 2**20
# The largest KV-cache expectation accepted (2^40 tokens: far beyond any cluster's cache).
MAX_KV_TOKENS = 2**40
# Marks an answer the checks did not foresee (see run_checks); the fuzz tests assert it never shows.
UNFORESEEN = "unexpected answer"
# Exit statuses (docs/hostile-input.md): every check passed; a check failed or the endpoint cannot be
# reached; usage error (argparse's own); the kv check's shortfall was the only failure; golden answers
# differing under --golden-exact were the only failure.
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_KV_SHORTFALL, EXIT_GOLDEN_DIFFERS = 0, 1, 2, 3, 4


@dataclass
class CheckResult:
    name: str
    passed: bool
    evidence: str
    # The kv check measured a capacity below the expectation (as opposed to not measuring one).
    shortfall: bool = False
    # The golden check found answers that differ from the record, and exact agreement was asked for.
    golden_differs: bool = False

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name:<8} {self.evidence}"


class CheckFailed(Exception):
    """A check's expectation was not met; the message is the evidence."""


class CapacityShortfall(CheckFailed):
    """The server answered its capacity honestly, and it is below the expectation."""


class GoldenDiffers(CheckFailed):
    """The server answered every golden prompt, and some answers differ from the record (exact mode)."""


@dataclass
class SmokeContext:
    client: Client
    model: str
    max_model_len: int | None
    # A max_model_len the server reported but the check will not build prompts for.
    reported_too_long: int | None = None
    names: tuple[str, ...] = ()
    # The KV-cache tokens the server should hold (the plan's kvCacheTokens), and the tolerated
    # shortfall as a fraction; None skips the kv check.
    expect_kv_tokens: int | None = None
    kv_tolerance: float = kv_capacity.DEFAULT_TOLERANCE
    # The template check runs when asked; each string must be one of the rendered chat's tokens.
    check_template: bool = False
    template_tokens: tuple[str, ...] = ()
    # What the kv check measured, for a caller's report (endpoint_tools/verify.py); None until then.
    kv_verdict: kv_capacity.Verdict | None = None
    # The golden check: "record" (answer the prompts, keep the record), "report" or "exact" (compare
    # with golden_record; exact fails on any difference); None skips it.
    golden_mode: str | None = None
    golden_record: golden.Record | None = None
    golden_key: dict[str, str] | None = None
    # Where --record-golden writes the record (None: kept in golden_recorded only, as the Job does).
    golden_path: str | None = None
    # What the golden check produced, for a caller's report; None until then.
    golden_recorded: golden.Record | None = None
    golden_comparison: golden.Comparison | None = None
    # The live answers with the live key, whatever the mode (a record to commit when they changed).
    golden_live: golden.Record | None = None


# -- the checks --------------------------------------------------------------------------------


def check_health(ctx: SmokeContext) -> str:
    resp = ctx.client.get("/health")
    if resp.status != 200:
        raise CheckFailed(f"GET /health answered HTTP {resp.status}: {error_message(resp)}")
    return "GET /health -> 200"


def check_models(ctx: SmokeContext) -> str:
    resp = ctx.client.get("/v1/models")
    if resp.status != 200:
        raise CheckFailed(f"GET /v1/models answered HTTP {resp.status}: {error_message(resp)}")
    data = resp.json()
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise CheckFailed(f"/v1/models answer has no `data` list: {_quote(resp.text())}")
    ids = [e.get("id") for e in entries if isinstance(e, dict)]
    if ctx.model not in ids:
        shown = ", ".join(_quote(i, 60) for i in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        raise CheckFailed(f"/v1/models lists [{shown}], not {ctx.model!r} (check --model or --served-model-name)")
    entry = next(e for e in entries if isinstance(e, dict) and e.get("id") == ctx.model)
    reported = entry.get("max_model_len")
    if reported is None:
        return f"/v1/models lists {ctx.model!r}"
    length = whole_number(reported)
    if length is None or not length > OUTPUT_BUDGET + 1:
        raise CheckFailed(
            f"/v1/models reports max_model_len {_quote(reported)} for {ctx.model!r}, not a context length"
        )
    if length > MAX_CONTEXT_CHECKED:
        ctx.reported_too_long = length
        raise CheckFailed(
            f"/v1/models reports max_model_len {length:,}, beyond the {MAX_CONTEXT_CHECKED:,} tokens "
            "the smoke check builds prompts for; pass --max-model-len to check a shorter boundary"
        )
    if ctx.max_model_len is None:
        # vLLM reports the context length it was started with; use it when not given.
        ctx.max_model_len = length
    return f"/v1/models lists {ctx.model!r}, max_model_len={length}"


def _quote(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(" ".join(text.split())[:limit]) + ("..." if len(text) > limit else "")


def _chat_body(model: str, content: str, max_tokens: int, **extra) -> dict:
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        **extra,
    }


def check_chat(ctx: SmokeContext) -> str:
    resp = ctx.client.post("/v1/chat/completions", _chat_body(ctx.model, "Say hello in five words.", 16))
    if resp.status != 200:
        raise CheckFailed(f"chat completion answered HTTP {resp.status}: {error_message(resp)}")
    data = resp.json()
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(message, dict) or not isinstance(usage, dict):
        raise CheckFailed(f"chat completion lacks choices/message/finish_reason/usage: {_quote(resp.text(), 200)}")
    assert isinstance(choice, dict)  # the message was read from it
    text, finish = message.get("content"), choice.get("finish_reason")
    if not isinstance(text, str) or not text:
        raise CheckFailed(
            f"chat completion returned no text (content {_quote(text, 60)}, finish_reason={_quote(finish, 40)})"
        )
    if not isinstance(finish, str) or not finish:
        raise CheckFailed(f"chat completion has no finish_reason (got {_quote(finish, 40)})")
    completion, prompt = whole_number(usage.get("completion_tokens")), whole_number(usage.get("prompt_tokens"))
    if not completion or completion < 0:
        raise CheckFailed(f"chat completion usage has no completion_tokens: {_quote(usage, 200)}")
    return f"{len(text)} chars, finish_reason={_quote(finish, 40)}, usage prompt={prompt} completion={completion}"


def check_stream(ctx: SmokeContext) -> str:
    body = _chat_body(ctx.model, "Count from one to five.", 16, stream=True, stream_options={"include_usage": True})
    chunks = 0
    pieces: list[str] = []
    last = None
    for event in ctx.client.stream("/v1/chat/completions", body):
        last = event.data
        if event.done:
            break
        chunks += 1
        data = event.json()
        # An error event after the 200 header means generation failed, whatever came before it.
        failure = stream_event_error(data)
        if failure:
            raise CheckFailed(f"event {chunks} of the stream: {failure}")
        choices = data.get("choices")
        if not isinstance(choices, list):
            if "usage" in data and choices in (None, []):
                continue  # the final usage chunk (stream_options.include_usage) carries no choices
            raise CheckFailed(f"stream event {chunks} has no `choices` list: {_quote(event.data, 120)}")
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            content = delta.get("content") if isinstance(delta, dict) else None
            if content is not None and not isinstance(content, str):
                raise CheckFailed(f"stream event {chunks} carries content that is not text: {_quote(content, 60)}")
            pieces.append(content or "")
    if last != "[DONE]":
        raise CheckFailed(f"stream ended after {chunks} events without data: [DONE] (last: {_quote(last, 80)})")
    if not "".join(pieces):
        raise CheckFailed(f"stream of {chunks} events carried no text")
    return f"{chunks} events, {len(''.join(pieces))} chars, ended with data: [DONE]"


def _sized_messages(ctx: SmokeContext, target: int) -> tuple[list[dict], int]:
    """Chat messages whose templated prompt is exactly `target` tokens by the server's count."""
    base = "Repeat the last word of this text:"

    def count(filler: str, n: int) -> int:
        return len(ctx.client.tokenize(ctx.model, messages=[{"role": "user", "content": base + filler * n}]))

    for filler in _FILLER_CANDIDATES:
        at_10, at_11, at_20 = count(filler, 10), count(filler, 11), count(filler, 20)
        if at_11 - at_10 != 1 or at_20 - at_10 != 10:
            continue  # this filler merges with its neighbours; its cost is not one token each
        n = target - (at_10 - 10)
        if n < 0:
            raise CheckFailed(f"max-model-len {ctx.max_model_len} is too small for the check's prompt")
        messages = [{"role": "user", "content": base + filler * n}]
        got = len(ctx.client.tokenize(ctx.model, messages=messages))
        if got == target:
            return messages, got
    raise CheckFailed("could not build a prompt of an exact token length with this tokenizer")


@dataclass(frozen=True)
class BoundaryReply:
    """One context-boundary request: the prompt length by the server's /tokenize and its answer."""

    prompt_tokens: int
    response: Response

    @property
    def status(self) -> int:
        return self.response.status

    def usage(self) -> dict:
        """The answer's usage block ({} when absent or not JSON)."""
        try:
            data = parse_json(self.response.body, "answer")
        except EndpointError:
            return {}
        usage = data.get("usage") if isinstance(data, dict) else None
        return usage if isinstance(usage, dict) else {}

    def counted_prompt(self) -> int:
        """The server's own prompt count when it reports one, else the /tokenize count."""
        value = whole_number(self.usage().get("prompt_tokens"))
        return value if value is not None else self.prompt_tokens

    def completion_tokens(self) -> int | None:
        return whole_number(self.usage().get("completion_tokens"))


def _boundary_request(ctx: SmokeContext, messages: list[dict], n_prompt: int) -> BoundaryReply:
    # ignore_eos (a vLLM sampling parameter; /tokenize already makes this check vLLM-only) makes the
    # server generate every token it allows, so "the full budget" and "clamped" are measurable
    # rather than hidden behind a model that happened to stop early.
    body = {"model": ctx.model, "messages": messages, "max_tokens": OUTPUT_BUDGET, "temperature": 0, "ignore_eos": True}
    return BoundaryReply(n_prompt, ctx.client.post("/v1/chat/completions", body))


def judge_context(
    limit: int, budget: int, fit: BoundaryReply, edge: BoundaryReply, over: BoundaryReply, health_after: int
) -> str:
    """Judge the three boundary answers; the evidence of every part, or CheckFailed naming the failures.

      fit   prompt = limit - budget       must answer 200 with exactly `budget` completion tokens;
      edge  prompt = limit - budget + 1   must either be rejected with a 4xx, or be served with at most
                                          budget - 1 tokens so prompt + output never exceeds the limit
                                          (vLLM 0.32 clamps max_tokens to what fits; older vLLM rejected);
      over  prompt = limit + 1            must be rejected with a 4xx (the prompt alone cannot fit);
    and /health must answer 200 after all three.
    """
    parts: list[str] = []
    failures: list[str] = []

    def judge(ok: bool, text: str) -> None:
        parts.append(text if ok else f"FAILED {text}")
        if not ok:
            failures.append(text)

    # fit: the largest request that must be accepted whole.
    label = f"{fit.prompt_tokens}+{budget}={limit}"
    if fit.status != 200:
        judge(False, f"{label} -> HTTP {fit.status} ({error_message(fit.response)}), expected 200")
    else:
        produced = fit.completion_tokens()
        judge(
            produced == budget and fit.counted_prompt() == limit - budget,
            f"{label} -> 200 with prompt {fit.counted_prompt()} + {produced} output tokens "
            f"(expected {limit - budget} + {budget})",
        )

    # edge: one token more than fits with the full budget.
    label = f"{edge.prompt_tokens}+{budget}={limit + 1}"
    if 400 <= edge.status < 500:
        judge(True, f"{label} -> rejected with HTTP {edge.status} ({error_message(edge.response)[:80]})")
    elif edge.status == 200:
        produced = edge.completion_tokens()
        if produced is None:
            judge(
                False,
                f"{label} -> 200 without usage.completion_tokens; cannot tell whether output "
                f"stayed within max-model-len {limit}",
            )
        else:
            total = edge.counted_prompt() + produced
            judge(
                produced <= budget - 1 and total <= limit,
                f"{label} -> 200 with {produced} output tokens, prompt+output {total} "
                f"({'within' if total <= limit else 'over'} max-model-len {limit}; max_tokens clamped)",
            )
    else:
        judge(
            False,
            f"{label} -> HTTP {edge.status} ({error_message(edge.response)[:80]}), expected a 4xx "
            f"or a 200 clamped to {budget - 1} tokens",
        )

    # over: the prompt alone is over the limit.
    judge(
        400 <= over.status < 500,
        f"{over.prompt_tokens} -> {over.status} (prompt one over max-model-len; {error_message(over.response)[:80]})"
        + ("" if 400 <= over.status < 500 else ", expected a 4xx rejection"),
    )

    judge(health_after == 200, f"/health afterwards -> {health_after}")

    evidence = f"max-model-len {limit}, budget {budget}: " + "; ".join(parts)
    if failures:
        raise CheckFailed(evidence)
    return evidence


def check_context(ctx: SmokeContext) -> str:
    """The context limit is enforced exactly and an over-long prompt does not hurt the server.

    Three prompts, sized exactly by the server's own /tokenize (chat template included), judged by
    judge_context; /health is asked after all three.
    """
    if ctx.max_model_len is None:
        if ctx.reported_too_long:
            raise CheckFailed(
                f"the server's max_model_len {ctx.reported_too_long:,} is beyond the "
                f"{MAX_CONTEXT_CHECKED:,} tokens this check builds prompts for; pass --max-model-len"
            )
        raise CheckFailed("max-model-len unknown: pass --max-model-len (the server did not report a usable one)")
    limit = ctx.max_model_len
    replies = []
    for target in (limit - OUTPUT_BUDGET, limit - OUTPUT_BUDGET + 1, limit + 1):
        messages, n_prompt = _sized_messages(ctx, target)
        replies.append(_boundary_request(ctx, messages, n_prompt))
    health = ctx.client.get("/health")
    fit, edge, over = replies
    return judge_context(limit, OUTPUT_BUDGET, fit, edge, over, health_after=health.status)


def check_metrics(ctx: SmokeContext) -> str:
    resp = ctx.client.get("/metrics")
    if resp.status != 200:
        raise CheckFailed(f"GET /metrics answered HTTP {resp.status}")
    missing = missing_names(REQUIRED_METRICS, resp.text())
    if missing:
        raise CheckFailed("/metrics lacks " + ", ".join(describe_missing(m) for m in missing))
    return f"/metrics exposes all {len(REQUIRED_METRICS)} required series"


def check_kv(ctx: SmokeContext) -> str:
    """The KV-cache capacity the server allocated against the expected number (endpoint_tools/kv_capacity.py)."""
    resp = ctx.client.get("/metrics")
    if resp.status != 200:
        raise CheckFailed(f"GET /metrics answered HTTP {resp.status}")
    try:
        capacity = kv_capacity.read_capacity(resp.text())
    except kv_capacity.CapacityUnreadable as exc:
        raise CheckFailed(str(exc)) from None
    assert ctx.expect_kv_tokens is not None  # the check runs only with an expected number
    verdict = ctx.kv_verdict = kv_capacity.judge(ctx.expect_kv_tokens, capacity.tokens, ctx.kv_tolerance)
    line = kv_capacity.describe(verdict, capacity)
    if not verdict.passed:
        raise CapacityShortfall(line)
    return line


TEMPLATE_PROBE = "Name three colours."


def check_template(ctx: SmokeContext) -> str:
    """The chat template renders (vLLM's /tokenize applies it; return_token_strs shows its tokens)."""
    ids, strs = ctx.client.tokenize_strs(ctx.model, [{"role": "user", "content": TEMPLATE_PROBE}])
    plain = ctx.client.tokenize(ctx.model, prompt=TEMPLATE_PROBE, add_special_tokens=False)
    added = len(ids) - len(plain)
    if added <= 0:
        raise CheckFailed(
            f"a one-message chat is {len(ids)} tokens and its text alone {len(plain)}: the server "
            "applied no chat template"
        )
    shown = f"{' '.join(_quote(s, 30) for s in strs[:3])} ... {' '.join(_quote(s, 30) for s in strs[-3:])}"
    missing = [t for t in ctx.template_tokens if t not in strs]
    if missing:
        raise CheckFailed(
            f"the rendered chat ({len(ids)} tokens: {shown}) lacks " + ", ".join(_quote(t, 40) for t in missing)
        )
    expected = f"; has {', '.join(ctx.template_tokens)}" if ctx.template_tokens else ""
    return f"chat renders to {len(ids)} tokens, {added} from the template: {shown}{expected}"


def check_golden(ctx: SmokeContext) -> str:
    """Record the golden prompts' greedy answers, or compare them with a record (endpoint_tools/golden.py)."""
    key = dict(ctx.golden_key or {})
    if "engine" not in key:
        engine = golden.server_engine(ctx.client)
        if engine:
            key["engine"] = engine
    try:
        live = golden.run_prompts(ctx.client, ctx.model)
    except golden.GoldenError as exc:
        raise CheckFailed(str(exc)) from None
    ctx.golden_live = golden.Record(ctx.model, golden.normalized_key(key), live)
    if ctx.golden_mode == "record" or ctx.golden_record is None:
        rec = ctx.golden_recorded = ctx.golden_live
        with_ids = sum(o.token_ids is not None for o in live)
        where = ""
        if ctx.golden_path:
            try:
                # The first record of a checkout also makes its golden/ folder.
                os.makedirs(os.path.dirname(ctx.golden_path) or ".", exist_ok=True)
                with open(ctx.golden_path, "w", encoding="utf-8") as f:
                    f.write(rec.dumps())
            except OSError as exc:
                raise CheckFailed(f"cannot write the golden record {ctx.golden_path}: {exc.strerror or exc}") from None
            where = f" to {ctx.golden_path}"
        keyed = ", ".join(f"{k}={v}" for k, v in rec.key.items() if v is not None) or "no key fields known"
        return f"recorded {len(live)} golden answers ({with_ids} with token ids){where}; key {keyed}"
    comparison = ctx.golden_comparison = golden.compare(ctx.golden_record, key, live)
    line = comparison.describe()
    if not comparison.identical and ctx.golden_mode == "exact":
        raise GoldenDiffers(line + " (exact agreement asked for)")
    return line


def check_names(ctx: SmokeContext) -> str:
    """Each name answers a short chat completion under its own name (vLLM reports the name it served;
    the endpoint picker rewrites a renamed model back to the name asked for)."""
    answered, failures = [], []
    for name in ctx.names:
        try:
            resp = ctx.client.post("/v1/chat/completions", _chat_body(name, "Say hello in five words.", 8))
        except EndpointError as exc:
            failures.append(f"{name}: {exc}")
            continue
        if resp.status != 200:
            failures.append(f"{name}: HTTP {resp.status} ({error_message(resp)[:80]})")
            continue
        try:
            data = resp.json()
            text = data["choices"][0]["message"]["content"]
        except (EndpointError, KeyError, IndexError, TypeError):
            failures.append(f"{name}: answer without choices[0].message.content")
            continue
        if data.get("model") != name:
            failures.append(f"{name}: answered as {excerpt(data.get('model'))}")
        elif not text:
            failures.append(f"{name}: empty text")
        else:
            answered.append(f"{name} ({len(text)} chars)")
    if failures:
        raise CheckFailed(
            f"{len(failures)} of {len(ctx.names)} names failed: "
            + "; ".join(failures)
            + (f"; answered: {', '.join(answered)}" if answered else "")
        )
    return f"{len(answered)} names answered under their own name: {', '.join(answered)}"


CHECKS: tuple[tuple[str, Callable[[SmokeContext], str]], ...] = (
    ("health", check_health),
    ("models", check_models),
    ("chat", check_chat),
    ("stream", check_stream),
    ("context", check_context),
    ("metrics", check_metrics),
)


# What the entrance routes: the OpenAI API under /v1 (components/entrance/routes.py).
ENTRANCE_CHECKS = ("chat", "stream", "names")


def selected_checks(ctx: SmokeContext, entrance: bool = False) -> list[tuple[str, Callable[[SmokeContext], str]]]:
    checks = (
        list(CHECKS)
        + ([("kv", check_kv)] if ctx.expect_kv_tokens is not None else [])
        + ([("template", check_template)] if ctx.check_template or ctx.template_tokens else [])
        + ([("golden", check_golden)] if ctx.golden_mode else [])
        + ([("names", check_names)] if ctx.names else [])
    )
    return [(n, c) for n, c in checks if not entrance or n in ENTRANCE_CHECKS]


def run_checks(ctx: SmokeContext, entrance: bool = False) -> list[CheckResult]:
    results = []
    for name, check in selected_checks(ctx, entrance):
        try:
            results.append(CheckResult(name, True, check(ctx)))
        except CapacityShortfall as exc:
            results.append(CheckResult(name, False, _one_line(str(exc)), shortfall=True))
        except GoldenDiffers as exc:
            results.append(CheckResult(name, False, _one_line(str(exc)), golden_differs=True))
        except (CheckFailed, EndpointError) as exc:
            results.append(CheckResult(name, False, _one_line(str(exc))))
        except Exception as exc:
            # Every answer shape the checks know is handled above; reaching this is a gap in a check
            # (the fuzz tests assert it never happens), but it still fails the check with one line.
            results.append(
                CheckResult(name, False, f"{UNFORESEEN} ({type(exc).__name__}: {_one_line(str(exc))[:160]})")
            )
    return results


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- command line --------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    # float() accepts "nan" and "inf"; neither is a usable HTTP timeout.
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value


def _tokens(text: str) -> tuple[str, ...]:
    tokens = tuple(t.strip() for t in text.split(","))
    if any(not t or len(t) > 256 for t in tokens):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a comma-separated list of tokens")
    return tokens


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not names or any(not n for n in names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of names")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a model twice")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.smoke",
        description="Smoke-check an OpenAI-compatible (vLLM) endpoint.",
        epilog="exit status: 0 every check passed; 1 a check failed or the endpoint cannot be reached; 2 usage error; "
        "3 the only failure: less KV-cache capacity than --expect-kv-tokens; "
        "4 the only failure: golden answers differ from the record under --golden-exact",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="the served model name (default: the first of --names)")
    parser.add_argument(
        "--names",
        type=_names,
        default=(),
        help="comma-separated model and adapter names that must each answer under their own name",
    )
    parser.add_argument(
        "--entrance",
        action="store_true",
        help="the base URL is the stack's entrance: run only what it routes (chat, stream, names)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="name of the environment variable holding the API key (never the key itself)",
    )
    parser.add_argument(
        "--max-model-len",
        type=_whole,
        help=f"context length the server enforces, at most {MAX_CONTEXT_CHECKED:,} (default: what /v1/models reports)",
    )
    parser.add_argument(
        "--expect-kv-tokens",
        type=_whole,
        metavar="N",
        help="KV-cache tokens the server should hold (the stack output sizing[].kvCacheTokens); "
        "adds the kv check, read from /metrics",
    )
    parser.add_argument(
        "--kv-tolerance",
        type=_tolerance,
        default=kv_capacity.DEFAULT_TOLERANCE,
        metavar="PERCENT",
        help="how far below --expect-kv-tokens the server may be before the kv check fails (default 10)",
    )
    parser.add_argument(
        "--check-template",
        action="store_true",
        help="add the template check: the chat template renders (through /tokenize)",
    )
    parser.add_argument(
        "--expect-template-tokens",
        type=_tokens,
        default=(),
        metavar="TOKEN[,TOKEN...]",
        help="special tokens the rendered chat must contain (implies --check-template)",
    )
    parser.add_argument(
        "--record-golden",
        metavar="FILE",
        help="answer the golden prompts greedily and write the record to FILE "
        "(e.g. golden/<served-name>.json; docs/verification.md)",
    )
    parser.add_argument(
        "--golden",
        metavar="FILE",
        help="compare the golden prompts' answers with the record in FILE; reports which key "
        "fields changed and which answers differ",
    )
    parser.add_argument(
        "--golden-exact",
        action="store_true",
        help="with --golden: fail (exit 4 when nothing else failed) when any answer differs",
    )
    parser.add_argument(
        "--golden-key",
        type=_golden_key,
        default={},
        metavar="FIELD=VALUE[,...]",
        help="what the server runs, for the record and the comparison: "
        f"{', '.join(golden.KEY_FIELDS)} (engine defaults to what GET /version reports)",
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=60.0, help="seconds for each HTTP request, start to end (default 60)"
    )
    parser.add_argument(
        "--total-timeout",
        type=_seconds,
        default=600.0,
        help="seconds for the whole run; requests not done by then fail (default 600)",
    )
    return parser


def _tolerance(text: str) -> float:
    """A percentage, "10" or "10%", as a fraction; from 0 to below 100."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a percentage") from None
    if not math.isfinite(value) or not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} must be a percentage from 0 to below 100")
    return value / 100


def _golden_key(text: str) -> dict[str, str]:
    try:
        return golden.parse_key(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env: environment variable {args.api_key_env} is not set or empty")
    model = args.model or (args.names[0] if args.names else None)
    if model is None:
        parser.error("--model is required (or --names, whose first name is then the model)")
    if args.entrance and not args.names:
        parser.error("--entrance checks the names routed through it: give --names")
    if args.max_model_len is not None and args.max_model_len <= OUTPUT_BUDGET + 1:
        parser.error(f"--max-model-len must be greater than {OUTPUT_BUDGET + 1}")
    if args.max_model_len is not None and args.max_model_len > MAX_CONTEXT_CHECKED:
        parser.error(f"--max-model-len must be at most {MAX_CONTEXT_CHECKED:,}")
    if args.expect_kv_tokens is not None and not 0 < args.expect_kv_tokens <= MAX_KV_TOKENS:
        parser.error(f"--expect-kv-tokens must be a whole number from 1 to {MAX_KV_TOKENS:,}")
    if (args.check_template or args.expect_template_tokens) and args.entrance:
        parser.error(
            "the template check reads the server's /tokenize, which the entrance does not route: "
            "run it against the model's in-cluster Service"
        )
    if args.expect_kv_tokens is not None and args.entrance:
        parser.error(
            "--expect-kv-tokens reads the server's /metrics, which the entrance does not route: "
            "run it against the model's in-cluster Service"
        )
    golden_mode, golden_record = None, None
    if args.record_golden and args.golden:
        parser.error("--record-golden writes a record and --golden compares with one: give one of them")
    if args.golden_exact and not args.golden:
        parser.error("--golden-exact needs --golden FILE (the record to agree with)")
    if (args.record_golden or args.golden) and args.entrance:
        parser.error(
            "the golden check asks one server for greedy answers: run it against the model's "
            "in-cluster Service, not the entrance"
        )
    if args.record_golden:
        golden_mode = "record"
    elif args.golden:
        try:
            golden_record = golden.load_record(args.golden)
        except golden.GoldenError as exc:
            parser.error(f"--golden {args.golden}: {exc}")
        if golden_record.model != model:
            parser.error(f"--golden {args.golden}: the record is of model {golden_record.model!r}, not {model!r}")
        golden_mode = "exact" if args.golden_exact else "report"
    try:
        client = Client(
            args.base_url, api_key=api_key, timeout=args.timeout, deadline=time.monotonic() + args.total_timeout
        )
    except ValueError as exc:
        parser.error(str(exc))

    # An unreachable endpoint would fail every check the same way: say it once, plainly. (Any HTTP
    # answer will do: the entrance routes only /v1 and answers /health with 404.)
    try:
        client.get("/health", timeout=min(args.timeout, 10.0))
    except EndpointError as exc:
        print(f"smoke: cannot reach {client.base_url}: {exc}", file=sys.stderr)
        return EXIT_FAILED

    ctx = SmokeContext(
        client,
        model,
        args.max_model_len,
        names=args.names,
        expect_kv_tokens=args.expect_kv_tokens,
        kv_tolerance=args.kv_tolerance,
        check_template=args.check_template,
        template_tokens=args.expect_template_tokens,
        golden_mode=golden_mode,
        golden_record=golden_record,
        golden_key=args.golden_key,
        golden_path=args.record_golden,
    )
    results = run_checks(ctx, entrance=args.entrance)
    for result in results:
        print(result.line())
    return summarize(results)


def summarize(results: list[CheckResult]) -> int:
    """Print the summary line; the exit status (a KV shortfall alone is EXIT_KV_SHORTFALL, golden
    answers differing under exact mode alone EXIT_GOLDEN_DIFFERS)."""
    failed = [r for r in results if not r.passed]
    print(
        f"smoke: {len(results) - len(failed)}/{len(results)} checks passed"
        + (f"; failed: {', '.join(r.name for r in failed)}" if failed else "")
    )
    if not failed:
        return EXIT_PASSED
    if all(r.shortfall for r in failed):
        return EXIT_KV_SHORTFALL
    return EXIT_GOLDEN_DIFFERS if all(r.golden_differs for r in failed) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
