"""Load sweep of an OpenAI-compatible (vLLM) endpoint: where does latency break your target?

    python -m components.loadtest --base-url URL --model NAME --concurrency 1,2,4,8 --requests 40 \\
        --prompt-tokens normal:256,64 --output-tokens uniform:64,256 [--slo-ttft-ms 500] \\
        [--json sweep.json] [--chart sweep.svg] [--timeout 600] [--seed 0]

For each concurrency level, `--requests` streamed completions are sent by that many concurrent
clients. Per level it reports time to first token (TTFT), inter-token latency (ITL, the gap between
streamed chunks) and time per output token (TPOT, per request) at p50, p95 and p99, output tokens
per second, and errors; then a table, optional JSON and an SVG chart, and,
with --slo-ttft-ms, the highest concurrency whose p95 TTFT stays within the target.

Predicted against measured (endpoint_tools/expectation.py): --expect-from-plan build/<stack>/plan.json
takes the plan's prediction for --model (its lengths and SLO become the sweep's), or explicit values
--expect-ttft-ms, --expect-ttft-p95-ms, --expect-tpot-ms, --expect-output-tps (one value, or one per
--concurrency level) and --expect-highest-concurrency with --slo-ttft-ms / --slo-tpot-ms; the report
adds per level predicted/measured with the error in %, and the highest concurrency meeting the SLO
predicted against measured (within one sweep step or not). A prediction that cannot be used (a
missing or garbled plan.json, a model not in it or not predicted, a level or length it was not made
at, a bad number) is a usage error naming the flag.

Distributions (--prompt-tokens, --output-tokens): fixed:N, uniform:LO,HI, normal:MEAN,SD
(endpoint_tools/load_dist.py); draws use --seed, so a sweep is repeatable.

Prompts: windows of varied text (endpoint_tools/prompt_corpus.py) tokenized once by the server's
/tokenize and sent as token ids to /v1/completions, so each prompt has exactly the sampled length
and no two share a long prefix. Without /tokenize (not vLLM), text of about 4 characters per token
is sent instead and the report says lengths are approximate. Output lengths are made exact with
vLLM's `ignore_eos` (a random-weight or chatty model would otherwise stop early or late);
--no-ignore-eos leaves it out for servers that reject unknown parameters.

Bounds: --requests per level (at most 100,000), at most 1,024 concurrent clients, --timeout
seconds for the whole sweep including its set-up (requests not started by then are counted as not
started; a request running past it is cut off and counted as an error), and --request-timeout
seconds for each request from start to end (not per read). Answers are read within the client's caps
(endpoint_tools/openai_client.py: 32 MiB per body, 1 MiB per stream event, 100,000 events and 64 MiB
per stream); prompt and output lengths are at most 1,048,576 tokens. A request whose stream carries
an error event, ends without `data: [DONE]` or is malformed is an error of that level.
Exit status: 0 when the sweep ran (errors are results, shown in the table), 1 when the endpoint
could not be reached, answered its set-up requests (/v1/models, /tokenize) malformed, or no request
succeeded, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import queue
import random
import sys
import threading
import time
from dataclasses import dataclass

from common.untrusted import InputLimitError, read_text_file
from endpoint_tools.expectation import (
    MAX_PLAN_JSON_BYTES,
    Expectation,
    ExpectationError,
    compare,
    from_plan_json,
    from_values,
    missing_levels,
)
from endpoint_tools.expectation import lines as comparison_lines
from endpoint_tools.load_dist import Distribution, DistributionError, parse_distribution
from endpoint_tools.load_report import (
    LevelResult,
    RequestSample,
    format_table,
    highest_meeting_slo,
    render_svg,
    summarize,
)
from endpoint_tools.openai_client import (
    Client,
    EndpointError,
    MalformedAnswer,
    error_message,
    stream_event_error,
    whole_number,
)
from endpoint_tools.prompt_corpus import passage

# Rough characters per token for English text, used only when the server cannot count tokens.
_CHARS_PER_TOKEN_FALLBACK = 4
SLO_STAT = "p95"
MAX_REQUESTS = 100_000
MAX_CONCURRENCY = 1024
# The prompt corpus doubles until it holds the longest prompt twice; a tokenizer whose count does
# not grow with the text (an empty /tokenize answer) would make that loop endless, so growth is
# checked and the text stops at 64 MiB.
MAX_CORPUS_CHARS = 64 * 1024 * 1024


@dataclass(frozen=True)
class PlannedRequest:
    prompt: list[int] | str
    prompt_tokens: int
    output_tokens: int


class PromptSource:
    """Prompts of exact token lengths cut from one tokenized, shuffled corpus."""

    def __init__(self, client: Client, model: str, rng: random.Random, longest: int):
        self.rng = rng
        self.exact = True
        text_chars = max(4096, longest * 8)
        try:
            tokens: list[int] = []
            # Grow the corpus until a window of the longest prompt fits with room to move around.
            while len(tokens) < longest * 2 + 16:
                if text_chars > MAX_CORPUS_CHARS:
                    raise MalformedAnswer(
                        f"/tokenize counts {len(tokens):,} tokens in {text_chars // 2:,} characters "
                        f"of text, too few for prompts of {longest:,} tokens; it does not count "
                        "tokens like a tokenizer"
                    )
                counted = client.tokenize(model, prompt=passage(rng, text_chars), add_special_tokens=False)
                if len(counted) <= len(tokens):
                    raise MalformedAnswer(
                        f"/tokenize counts {len(counted):,} tokens in {text_chars:,} characters of "
                        f"text, no more than in half of it; it does not count tokens like a tokenizer"
                    )
                tokens = counted
                text_chars *= 2
            self.tokens = tokens
        except MalformedAnswer:
            raise
        except EndpointError:
            self.exact = False
            self.text = passage(rng, longest * _CHARS_PER_TOKEN_FALLBACK * 2 + 64)

    def prompt(self, n_tokens: int) -> list[int] | str:
        if self.exact:
            start = self.rng.randrange(0, len(self.tokens) - n_tokens + 1)
            return self.tokens[start : start + n_tokens]
        n_chars = n_tokens * _CHARS_PER_TOKEN_FALLBACK
        start = self.rng.randrange(0, len(self.text) - n_chars + 1)
        return self.text[start : start + n_chars]


def plan_requests(
    source: PromptSource, rng: random.Random, count: int, prompt_dist: Distribution, output_dist: Distribution
) -> list[PlannedRequest]:
    planned = []
    for _ in range(count):
        n_in, n_out = prompt_dist.sample(rng), output_dist.sample(rng)
        planned.append(PlannedRequest(source.prompt(n_in), n_in, n_out))
    return planned


def run_one(
    client: Client, model: str, req: PlannedRequest, deadline: float, request_timeout: float, ignore_eos: bool = True
) -> RequestSample:
    body = {
        "model": model,
        "prompt": req.prompt,
        "max_tokens": req.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True
    started = time.perf_counter()
    first: float | None = None
    last = started  # moved with `first`, and read only once `first` is set
    gaps: list[float] = []
    chunks = 0
    usage_tokens = None
    done = False
    try:
        timeout = min(request_timeout, deadline - time.monotonic())
        if timeout <= 0:
            return RequestSample(ok=False, error="cut off by the sweep's --timeout")
        for event in client.stream("/v1/completions", body, timeout=timeout):
            if event.done:
                done = True
                break
            if time.monotonic() > deadline:
                return RequestSample(ok=False, error="cut off by the sweep's --timeout")
            data = event.json()
            failure = stream_event_error(data)
            if failure:
                # vLLM reports a failure after the 200 header as an error event (then [DONE]); text
                # streamed before it does not make the request a success.
                return RequestSample(ok=False, error=failure)
            usage = data.get("usage")
            counted = whole_number(usage.get("completion_tokens")) if isinstance(usage, dict) else None
            if counted is not None and counted >= 0:
                usage_tokens = counted
            choices = data.get("choices")
            if any(
                isinstance(choice, dict) and isinstance(choice.get("text"), str) and choice["text"]
                for choice in (choices if isinstance(choices, list) else [])
            ):
                chunks += 1
                if first is None:
                    first = event.at
                else:
                    gaps.append(event.at - last)
                last = event.at
    except EndpointError as exc:
        return RequestSample(ok=False, error=str(exc))
    if not done:
        # An OpenAI stream ends with `data: [DONE]`; one that stops without it was cut short.
        return RequestSample(ok=False, error="stream ended without data: [DONE]")
    if first is None:
        return RequestSample(ok=False, error="stream produced no tokens")
    return RequestSample(
        ok=True,
        ttft=first - started,
        itl=gaps,
        output_tokens=usage_tokens if usage_tokens is not None else chunks,
        prompt_tokens=req.prompt_tokens,
        latency=last - started,
    )


def measure(
    client: Client, model: str, req: PlannedRequest, deadline: float, request_timeout: float, ignore_eos: bool = True
) -> RequestSample:
    """run_one, with any unexpected exception turned into an error sample.

    Requests run in worker threads, where an uncaught exception ends the thread quietly and its
    request (and every one it would have taken next) vanishes from the results.
    """
    try:
        return run_one(client, model, req, deadline, request_timeout, ignore_eos)
    except Exception as exc:
        return RequestSample(ok=False, error=f"client error: {type(exc).__name__}: {exc}")


class Progress:
    """A one-line progress bar on stderr; plain lines when stderr is not a terminal (CI logs)."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.errors = total, 0, 0
        self.stream = stream
        self.live = hasattr(stream, "isatty") and stream.isatty()
        self.lock = threading.Lock()
        self.label = ""

    def start_level(self, label: str) -> None:
        self.label = label
        self._draw()

    def advance(self, ok: bool) -> None:
        with self.lock:
            self.done += 1
            self.errors += 0 if ok else 1
            self._draw()

    def end_level(self) -> None:
        if not self.live:
            print(
                f"loadtest: {self.label} finished, {self.done}/{self.total} requests, {self.errors} errors",
                file=self.stream,
                flush=True,
            )

    def _draw(self) -> None:
        if not self.live:
            return
        width = 30
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {self.label} errors={self.errors}  ")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def run_level(
    client: Client,
    model: str,
    concurrency: int,
    planned: list[PlannedRequest],
    deadline: float,
    request_timeout: float,
    progress: Progress,
    ignore_eos: bool = True,
) -> LevelResult:
    work: queue.Queue[PlannedRequest] = queue.Queue()
    for req in planned:
        work.put(req)
    samples: list[RequestSample] = []
    lock = threading.Lock()

    def worker() -> None:
        while time.monotonic() < deadline:
            try:
                req = work.get_nowait()
            except queue.Empty:
                return
            sample = measure(client, model, req, deadline, request_timeout, ignore_eos)
            with lock:
                samples.append(sample)
            progress.advance(sample.ok)

    progress.start_level(f"concurrency={concurrency}")
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    duration = time.perf_counter() - started
    progress.end_level()
    return summarize(concurrency, samples, len(planned), duration)


# -- command line --------------------------------------------------------------------------------


def _concurrency_list(text: str) -> list[int]:
    shown = repr(text[:60])
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{shown} is not a comma-separated list of whole numbers, e.g. 1,2,4,8"
        ) from None
    if not levels or any(not 1 <= level <= MAX_CONCURRENCY for level in levels):
        raise argparse.ArgumentTypeError(
            f"{shown}: every level must be >= 1 and at most {MAX_CONCURRENCY}, e.g. 1,2,4,8"
        )
    if len(set(levels)) > 64:
        raise argparse.ArgumentTypeError(f"{shown}: at most 64 levels")
    return sorted(set(levels))


def _distribution(text: str) -> Distribution:
    try:
        return parse_distribution(text)
    except DistributionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind, upper: float = math.inf):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        # float() accepts "nan" and "inf"; neither is a usable count, target or time limit.
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} must be a finite number greater than 0")
        if value > upper:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} must be at most {upper:,}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.loadtest",
        description="Load sweep of an OpenAI-compatible (vLLM) endpoint: latency against concurrency.",
        epilog="DIST: fixed:N | uniform:LO,HI | normal:MEAN,SD (token counts). exit status: 0 the sweep ran "
        "(failed requests are results); 1 the endpoint is unreachable, answers /v1/models or /tokenize "
        "malformed, or no request succeeded; 2 usage error",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument(
        "--concurrency",
        type=_concurrency_list,
        default=[1, 2, 4, 8],
        help="comma-separated concurrency levels (default 1,2,4,8)",
    )
    parser.add_argument(
        "--requests",
        type=_positive(int, MAX_REQUESTS),
        default=20,
        help=f"requests per level, at most {MAX_REQUESTS:,} (default 20)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=_distribution,
        metavar="DIST",
        help="prompt length distribution (default normal:256,64; with --expect-from-plan fixed at the plan's)",
    )
    parser.add_argument(
        "--output-tokens",
        type=_distribution,
        metavar="DIST",
        help="output length distribution (default uniform:64,256; with --expect-from-plan fixed at the plan's)",
    )
    parser.add_argument("--slo-ttft-ms", type=_positive(float), help=f"TTFT target; the {SLO_STAT} must stay within it")
    parser.add_argument(
        "--slo-tpot-ms", type=_positive(float), help="TPOT target for the comparison with a prediction (its median)"
    )
    expect = parser.add_argument_group(
        "prediction", "report predicted against measured per level (endpoint_tools/expectation.py; docs/capacity.md)"
    )
    expect.add_argument(
        "--expect-from-plan",
        metavar="PLAN_JSON",
        help="build/<stack>/plan.json: the plan's prediction for --model (models[].prediction)",
    )
    for flag, what in (
        ("--expect-ttft-ms", "TTFT mean (ms)"),
        ("--expect-ttft-p95-ms", "TTFT p95 (ms)"),
        ("--expect-tpot-ms", "TPOT/ITL (ms)"),
        ("--expect-output-tps", "output tokens per second"),
    ):
        expect.add_argument(
            flag, metavar="V[,V...]", help=f"predicted {what}: one value, or one per --concurrency level"
        )
    expect.add_argument(
        "--expect-highest-concurrency", metavar="N", help="predicted highest concurrency meeting the SLO flags"
    )
    parser.add_argument("--json", type=pathlib.Path, metavar="FILE", help="write the results as JSON")
    parser.add_argument("--chart", type=pathlib.Path, metavar="FILE.svg", help="write an SVG chart")
    parser.add_argument(
        "--timeout", type=_positive(float), default=600.0, help="seconds for the whole sweep (default 600)"
    )
    parser.add_argument(
        "--request-timeout",
        type=_positive(float),
        default=120.0,
        help="seconds one request may take, start to end (default 120)",
    )
    parser.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    parser.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="do not send vLLM's ignore_eos (for servers that reject unknown parameters); "
        "output lengths then end where the model stops",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed for lengths and prompts (default 0)")
    return parser


def output_path_problem(path: pathlib.Path) -> str | None:
    """Why a report file cannot be written at `path`, or None when it can (checked, not created)."""
    if path.is_dir():
        return "is a directory; give a file name"
    folder = path.parent
    if not folder.is_dir():
        return f"folder {folder} does not exist; create it first"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "exists and is not writable"
    return None


def _server_max_model_len(client: Client, model: str) -> int | None:
    resp = client.get("/v1/models")
    if resp.status != 200:
        raise EndpointError(f"GET /v1/models answered HTTP {resp.status}: {error_message(resp)}")
    data = resp.json()
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise MalformedAnswer("GET /v1/models answer has no `data` list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            value = whole_number(entry.get("max_model_len"))
            return value if value is not None and value > 0 else None
    ids = [str(e.get("id"))[:60] for e in entries[:10] if isinstance(e, dict)]
    raise EndpointError(f"--model {model!r} is not served here; /v1/models lists {ids}")


EXPECT_FLAGS = ("--expect-ttft-ms", "--expect-ttft-p95-ms", "--expect-tpot-ms", "--expect-output-tps")
DEFAULT_PROMPT_TOKENS = "normal:256,64"
DEFAULT_OUTPUT_TOKENS = "uniform:64,256"
# A distribution's mean may differ this much from the plan's length and still be compared.
LENGTH_TOLERANCE = 0.01


def _values(flag: str, text: str | None, whole: bool = False) -> list[float] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ExpectationError(f"{flag} {text[:60]!r}: not a comma-separated list of numbers, e.g. 12.5,14") from None
    if not values or len(values) > 64 or any(not math.isfinite(v) or not 0 < v <= 1e9 for v in values):
        raise ExpectationError(f"{flag} {text[:60]!r}: give 1 to 64 finite numbers above 0 and at most 1e9")
    if whole and any(not v.is_integer() for v in values):
        raise ExpectationError(f"{flag} {text[:60]!r}: give a whole number, e.g. 8")
    return values


def _length(flag: str, given: Distribution | None, planned: int | None, default: str) -> Distribution:
    if planned is None:
        return given or parse_distribution(default)
    if given is None:
        return parse_distribution(f"fixed:{planned}")
    if abs(given.mean - planned) > LENGTH_TOLERANCE * planned:
        raise ExpectationError(
            f"{flag} {given} centres on {given.mean:g} tokens but the plan predicted at {planned}; "
            f"leave {flag} out (fixed:{planned}) or give a distribution with mean {planned}"
        )
    return given


def resolve_expectation(args: argparse.Namespace) -> Expectation | None:
    """The prediction the flags name (None without one); sets the lengths and the SLO it was made at."""
    explicit = {flag: getattr(args, flag[2:].replace("-", "_")) for flag in EXPECT_FLAGS}
    highest_text = args.expect_highest_concurrency
    expectation = None
    if args.expect_from_plan is not None:
        given = [f for f, v in explicit.items() if v is not None] + (
            ["--expect-highest-concurrency"] if highest_text is not None else []
        )
        if given:
            raise ExpectationError(f"--expect-from-plan and {given[0]}: give the plan or explicit values, not both")
        try:
            text = read_text_file(
                args.expect_from_plan, MAX_PLAN_JSON_BYTES, f"--expect-from-plan {args.expect_from_plan}"
            )
        except (OSError, InputLimitError) as exc:
            raise ExpectationError(
                f"{' '.join(str(exc).split())}; run `make plan` and pass build/<stack>/plan.json"
            ) from None
        expectation = from_plan_json(text, args.model)
        missing = missing_levels(expectation, args.concurrency)
        if missing:
            known = ",".join(str(n) for n in sorted(expectation.levels))
            raise ExpectationError(
                f"--concurrency {','.join(map(str, missing))}: the plan predicted levels {known}; sweep those, "
                "or add the levels to models[].verification.sweep.concurrency and run `make plan` again"
            )
        for flag, value, planned in (
            ("--slo-ttft-ms", args.slo_ttft_ms, expectation.ttft_slo_ms),
            ("--slo-tpot-ms", args.slo_tpot_ms, expectation.tpot_slo_ms),
        ):
            if value is not None and planned is not None and abs(value - planned) > 1e-6 * planned:
                raise ExpectationError(
                    f"{flag} {value:g} differs from the plan's SLO ({planned:g} ms) its prediction was made at; "
                    f"leave {flag} out"
                )
        args.slo_ttft_ms = expectation.ttft_slo_ms if args.slo_ttft_ms is None else args.slo_ttft_ms
        args.slo_tpot_ms = expectation.tpot_slo_ms if args.slo_tpot_ms is None else args.slo_tpot_ms
    elif any(v is not None for v in explicit.values()) or highest_text is not None:
        values = {flag: _values(flag, text) for flag, text in explicit.items()}
        highest = _values("--expect-highest-concurrency", highest_text, whole=True)
        if highest is not None and (len(highest) != 1 or (args.slo_ttft_ms is None and args.slo_tpot_ms is None)):
            raise ExpectationError(
                "--expect-highest-concurrency takes one number and needs the SLO it was predicted at "
                "(--slo-ttft-ms and/or --slo-tpot-ms)"
            )
        expectation = from_values(
            args.concurrency,
            values,
            highest=int(highest[0]) if highest else None,
            ttft_slo_ms=args.slo_ttft_ms,
            tpot_slo_ms=args.slo_tpot_ms,
        )
    planned_in = expectation.prompt_tokens if expectation else None
    planned_out = expectation.output_tokens if expectation else None
    args.prompt_tokens = _length("--prompt-tokens", args.prompt_tokens, planned_in, DEFAULT_PROMPT_TOKENS)
    args.output_tokens = _length("--output-tokens", args.output_tokens, planned_out, DEFAULT_OUTPUT_TOKENS)
    return expectation


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        expectation = resolve_expectation(args)
    except ExpectationError as exc:
        # One line naming the flag and the fix, the usage errors' status.
        print(f"{parser.prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.chart and args.chart.suffix.lower() != ".svg":
        parser.error(f"--chart {args.chart}: only SVG is written; use a name ending in .svg")
    # Checked before the sweep: a bad path found after it would throw away minutes of results.
    for flag, path in (("--json", args.json), ("--chart", args.chart)):
        problem = output_path_problem(path) if path else None
        if problem:
            parser.error(f"{flag} {path}: {problem}")
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env: environment variable {args.api_key_env} is not set or empty")
    deadline = time.monotonic() + args.timeout
    try:
        # The sweep's deadline bounds every request, the set-up ones (/v1/models, /tokenize) included.
        client = Client(args.base_url, api_key=api_key, timeout=args.request_timeout, deadline=deadline)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        max_len = _server_max_model_len(client, args.model)
    except EndpointError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    longest = args.prompt_tokens.upper_bound + args.output_tokens.upper_bound
    if max_len is not None and longest > max_len:
        parser.error(
            f"--prompt-tokens/--output-tokens reach {longest} tokens, over the server's "
            f"max_model_len {max_len}; lower the distributions"
        )

    rng = random.Random(args.seed)
    try:
        source = PromptSource(client, args.model, rng, args.prompt_tokens.upper_bound)
    except EndpointError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    if not source.exact:
        print("loadtest: the server has no /tokenize; prompt lengths are approximate", file=sys.stderr)

    # One unmeasured request first, so one-off start-up costs do not land in the first level.
    measure(client, args.model, PlannedRequest(source.prompt(8), 8, 4), deadline, args.request_timeout, args.ignore_eos)

    progress = Progress(args.requests * len(args.concurrency))
    levels: list[LevelResult] = []
    for concurrency in args.concurrency:
        planned = plan_requests(source, rng, args.requests, args.prompt_tokens, args.output_tokens)
        levels.append(
            run_level(
                client, args.model, concurrency, planned, deadline, args.request_timeout, progress, args.ignore_eos
            )
        )
    progress.close()

    print(format_table(levels))
    best = None
    if args.slo_ttft_ms:
        best = highest_meeting_slo(levels, args.slo_ttft_ms, SLO_STAT)
        print(
            f"SLO TTFT {SLO_STAT} <= {args.slo_ttft_ms:g} ms: "
            + (f"met up to concurrency {best}" if best is not None else "not met at any tested concurrency")
        )
    for level in levels:
        for message in level.error_samples:
            print(f"errors at concurrency {level.concurrency}: {message}")
    compared = compare(expectation, levels) if expectation is not None else None
    if compared is not None:
        print("\n".join(comparison_lines(compared)))

    title = f"{args.model}: prompt {args.prompt_tokens}, output {args.output_tokens}"
    if args.json:
        report = {
            "base_url": client.base_url,
            "model": args.model,
            "concurrency": args.concurrency,
            "requests_per_level": args.requests,
            "prompt_tokens": str(args.prompt_tokens),
            "output_tokens": str(args.output_tokens),
            "prompt_lengths_exact": source.exact,
            "seed": args.seed,
            "ignore_eos": args.ignore_eos,
            "slo": {
                "ttft_ms": args.slo_ttft_ms,
                "tpot_ms": args.slo_tpot_ms,
                "statistic": SLO_STAT,
                "highest_concurrency_meeting": best,
            },
            "levels": [level.to_json() for level in levels],
            # Predicted against measured (endpoint_tools/expectation.py), null without a prediction.
            "expectation": compared,
        }
    outputs = []
    if args.json:
        outputs.append(("--json", args.json, json.dumps(report, indent=2) + "\n"))
    if args.chart:
        outputs.append(("--chart", args.chart, render_svg(levels, title, args.slo_ttft_ms)))
    for flag, path, text in outputs:
        try:
            path.write_text(text)
        except OSError as exc:  # the folder was checked up front; it can still vanish or fill up
            print(f"loadtest: {flag} {path}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 1
    return 0 if any(level.completed for level in levels) else 1


if __name__ == "__main__":
    sys.exit(main())
