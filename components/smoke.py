"""Smoke checks for an OpenAI-compatible (vLLM) endpoint, run after `pulumi up`.

    python -m components.smoke --base-url URL --model NAME [--api-key-env VAR] [--max-model-len N]

Each check prints PASS or FAIL with its evidence; the exit status is 0 only when every check
passes (1 when one fails, 2 for a usage error). Checks, in order:

  health       GET /health answers 200
  models       GET /v1/models lists the served model name
  chat         one short chat completion returns text, a finish_reason and usage
  stream       a streamed chat completion ends with `data: [DONE]`
  context      a prompt of exactly max-model-len minus the output budget succeeds with that budget,
               a prompt one token over max-model-len is rejected with a 4xx, and /health still
               answers 200 afterwards (token counts come from the server's /tokenize, chat template
               included, so the boundary is exact; see check_context for the edge in between)
  metrics      GET /metrics exposes every series the stack's alerts and autoscaler query
               (components/vllm_metrics.py)

Standard library only, so it also runs as an in-cluster Job from a plain python image.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Callable

from components.openai_client import Client, EndpointError, error_message
from components.vllm_metrics import REQUIRED_METRICS, describe_missing, missing_names

# Tokens asked for in the context-boundary check: the prompt is sized so prompt + budget is exactly
# max-model-len, the largest request the server must accept.
OUTPUT_BUDGET = 8
# Filler pieces tried for sizing a prompt token by token; the first that costs exactly one token per
# repetition with this tokenizer is used (most BPE vocabularies have several of these).
_FILLER_CANDIDATES = (" the", " a", " and", " of", " x", " hello", "!", ".", " 1")


@dataclass
class CheckResult:
    name: str
    passed: bool
    evidence: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name:<8} {self.evidence}"


class CheckFailed(Exception):
    """A check's expectation was not met; the message is the evidence."""


@dataclass
class SmokeContext:
    client: Client
    model: str
    max_model_len: int | None


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
    entries = data.get("data", []) if isinstance(data, dict) else []
    ids = [e.get("id") for e in entries if isinstance(e, dict)]
    if ctx.model not in ids:
        raise CheckFailed(f"/v1/models lists {ids}, not {ctx.model!r} (check --model or --served-model-name)")
    entry = next(e for e in entries if e.get("id") == ctx.model)
    if ctx.max_model_len is None and isinstance(entry.get("max_model_len"), int):
        # vLLM reports the context length it was started with; use it when not given.
        ctx.max_model_len = entry["max_model_len"]
    extra = f", max_model_len={entry['max_model_len']}" if "max_model_len" in entry else ""
    return f"/v1/models lists {ctx.model!r}{extra}"


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
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"]
        finish = choice["finish_reason"]
        usage = data["usage"]
    except (KeyError, IndexError, TypeError):
        raise CheckFailed(f"chat completion lacks choices/message/finish_reason/usage: {str(data)[:200]}")
    if not text:
        raise CheckFailed(f"chat completion returned empty text (finish_reason={finish})")
    if not finish:
        raise CheckFailed("chat completion has no finish_reason")
    if not usage.get("completion_tokens"):
        raise CheckFailed(f"chat completion usage has no completion_tokens: {usage}")
    return (
        f"{len(text)} chars, finish_reason={finish}, usage prompt={usage.get('prompt_tokens')} "
        f"completion={usage.get('completion_tokens')}"
    )


def check_stream(ctx: SmokeContext) -> str:
    body = _chat_body(ctx.model, "Count from one to five.", 16, stream=True,
                      stream_options={"include_usage": True})
    chunks = 0
    pieces: list[str] = []
    last = None
    for event in ctx.client.stream("/v1/chat/completions", body):
        last = event.data
        if event.done:
            break
        chunks += 1
        try:
            for choice in event.json().get("choices", []):
                pieces.append((choice.get("delta") or {}).get("content") or "")
        except ValueError:
            raise CheckFailed(f"stream event is not JSON: {event.data[:120]!r}")
    if last != "[DONE]":
        raise CheckFailed(f"stream ended after {chunks} events without data: [DONE] (last: {str(last)[:80]!r})")
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


def _chat_status(ctx: SmokeContext, messages: list[dict]) -> tuple[int, str, int | None]:
    """HTTP status, error message (if any) and completion tokens of one bounded chat request."""
    resp = ctx.client.post("/v1/chat/completions",
                           {"model": ctx.model, "messages": messages, "max_tokens": OUTPUT_BUDGET, "temperature": 0})
    if resp.status == 200:
        usage = (resp.json() or {}).get("usage") or {}
        return 200, "", usage.get("completion_tokens")
    return resp.status, error_message(resp), None


def check_context(ctx: SmokeContext) -> str:
    """The context limit is enforced exactly and an over-long prompt does not hurt the server.

    Three prompts, sized by the server's own /tokenize (chat template included):
      max-model-len - budget   must succeed with max_tokens=budget (the largest full request);
      max-model-len - budget+1 is reported, not judged: vLLM up to 0.1x rejected it, vLLM 0.32
                               serves it and clamps max_tokens to what fits (api_utils.get_max_tokens);
      max-model-len + 1        must be rejected with a 4xx (the prompt alone cannot fit),
    and /health must still answer 200 afterwards.
    """
    if ctx.max_model_len is None:
        raise CheckFailed("max-model-len unknown: pass --max-model-len (the server did not report it)")
    limit = ctx.max_model_len
    fit_messages, n_fit = _sized_messages(ctx, limit - OUTPUT_BUDGET)
    status, message, produced = _chat_status(ctx, fit_messages)
    if status != 200:
        raise CheckFailed(f"prompt of {n_fit} tokens + max_tokens {OUTPUT_BUDGET} = max-model-len {limit} "
                          f"was refused with HTTP {status}: {message}")
    edge_messages, n_edge = _sized_messages(ctx, limit - OUTPUT_BUDGET + 1)
    edge_status, edge_message, edge_produced = _chat_status(ctx, edge_messages)
    if edge_status >= 500:
        raise CheckFailed(f"prompt of {n_edge} tokens + max_tokens {OUTPUT_BUDGET} answered HTTP {edge_status}: "
                          f"{edge_message}")
    edge = (f"{n_edge}+{OUTPUT_BUDGET} -> 200 with {edge_produced} output tokens (max_tokens clamped)"
            if edge_status == 200 else f"{n_edge}+{OUTPUT_BUDGET} -> {edge_status}")
    over_messages, n_over = _sized_messages(ctx, limit + 1)
    over_status, over_message, _ = _chat_status(ctx, over_messages)
    if not 400 <= over_status < 500:
        raise CheckFailed(f"prompt of {n_over} tokens (one over max-model-len {limit}) answered HTTP "
                          f"{over_status}, expected a 4xx rejection")
    health = ctx.client.get("/health")
    if health.status != 200:
        raise CheckFailed(f"after the over-long prompt /health answered HTTP {health.status}")
    return (f"max-model-len {limit}: {n_fit}+{OUTPUT_BUDGET} -> 200 with {produced} output tokens; {edge}; "
            f"{n_over} -> {over_status} ({over_message[:80]}); /health still 200")


def check_metrics(ctx: SmokeContext) -> str:
    resp = ctx.client.get("/metrics")
    if resp.status != 200:
        raise CheckFailed(f"GET /metrics answered HTTP {resp.status}")
    missing = missing_names(REQUIRED_METRICS, resp.text())
    if missing:
        raise CheckFailed("/metrics lacks " + ", ".join(describe_missing(m) for m in missing))
    return f"/metrics exposes all {len(REQUIRED_METRICS)} required series"


CHECKS: tuple[tuple[str, Callable[[SmokeContext], str]], ...] = (
    ("health", check_health),
    ("models", check_models),
    ("chat", check_chat),
    ("stream", check_stream),
    ("context", check_context),
    ("metrics", check_metrics),
)


def run_checks(ctx: SmokeContext) -> list[CheckResult]:
    results = []
    for name, check in CHECKS:
        try:
            results.append(CheckResult(name, True, check(ctx)))
        except (CheckFailed, EndpointError) as exc:
            results.append(CheckResult(name, False, str(exc)))
    return results


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.smoke",
        description="Smoke-check an OpenAI-compatible (vLLM) endpoint.",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="name of the environment variable holding the API key (never the key itself)")
    parser.add_argument("--max-model-len", type=int,
                        help="context length the server enforces (default: what /v1/models reports)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request (default 60)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env: environment variable {args.api_key_env} is not set or empty")
    if args.max_model_len is not None and args.max_model_len <= OUTPUT_BUDGET + 1:
        parser.error(f"--max-model-len must be greater than {OUTPUT_BUDGET + 1}")
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    try:
        client = Client(args.base_url, api_key=api_key, timeout=args.timeout)
    except ValueError as exc:
        parser.error(str(exc))

    # An unreachable endpoint would fail every check the same way: say it once, plainly.
    try:
        client.get("/health", timeout=min(args.timeout, 10.0))
    except EndpointError as exc:
        print(f"smoke: cannot reach {client.base_url}: {exc}", file=sys.stderr)
        return 1

    results = run_checks(SmokeContext(client, args.model, args.max_model_len))
    for result in results:
        print(result.line())
    failed = [r.name for r in results if not r.passed]
    print(f"smoke: {len(results) - len(failed)}/{len(results)} checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
