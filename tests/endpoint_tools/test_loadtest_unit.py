"""Pure parts of the load sweep: distributions, percentiles, SLO pick, table, SVG, CLI errors."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from endpoint_tools.load_dist import DistributionError, parse_distribution
from endpoint_tools.load_report import (
    RequestSample,
    format_table,
    highest_meeting_slo,
    percentile,
    render_svg,
    summarize,
)


@pytest.mark.parametrize(
    "spec, text, low, high",
    [
        ("fixed:128", "fixed:128", 128, 128),
        ("uniform:64,512", "uniform:64,512", 64, 512),
        ("normal:256,64", "normal:256,64", 1, 512),
        ("NORMAL:10,0", "normal:10,0", 10, 10),
    ],
)
def test_distributions_parse_and_stay_in_bounds(spec, text, low, high):
    dist = parse_distribution(spec)
    assert str(dist) == text
    rng = random.Random(1)
    draws = [dist.sample(rng) for _ in range(2000)]
    assert low <= min(draws) and max(draws) <= high == dist.upper_bound


def test_normal_draws_centre_on_the_mean_and_repeat_with_the_seed():
    dist = parse_distribution("normal:256,64")
    draws = [dist.sample(random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1  # same seed, same first draw
    many = [dist.sample(rng) for rng in [random.Random(3)] for _ in range(5000)]
    assert 250 < sum(many) / len(many) < 262


@pytest.mark.parametrize(
    "spec",
    [
        "256",
        "gauss:1,2",
        "fixed:0",
        "fixed:1.5",
        "fixed:",
        "uniform:10",
        "uniform:9,3",
        "uniform:0,4",
        "normal:0,1",
        "normal:5,-1",
        "normal:a,b",
    ],
)
def test_bad_distributions_are_rejected_with_the_accepted_forms(spec):
    with pytest.raises(DistributionError, match=r"e\.g\.|use fixed"):
        parse_distribution(spec)


def test_percentile_matches_linear_interpolation():
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 100) == 4.0
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match=r"percentile 101 is outside 0\.\.100"):
        percentile(values, 101)


def _level(concurrency, ttft_s, errors=0):
    samples = [RequestSample(ok=True, ttft=t, itl=[0.01, 0.02], output_tokens=3, latency=t + 0.03) for t in ttft_s]
    samples += [RequestSample(ok=False, error="HTTP 503") for _ in range(errors)]
    return summarize(concurrency, samples, planned=len(samples), duration_s=2.0)


def test_summary_reports_milliseconds_throughput_and_errors():
    level = _level(4, [0.1, 0.2, 0.3], errors=2)
    assert level.completed == 3 and level.errors == 2 and level.not_started == 0
    assert level.ttft_ms["p50"] == 200.0
    assert level.itl_ms["p50"] == 15.0
    assert level.tpot_ms["p50"] == 15.0  # (latency - ttft) / (3 tokens - 1) = 30 ms / 2
    assert level.output_tokens == 9 and level.output_tokens_per_s == 4.5
    assert level.error_samples == ["HTTP 503"]


def test_slo_pick_stops_at_the_first_level_that_breaks_it():
    levels = [_level(1, [0.1]), _level(2, [0.2]), _level(4, [0.9]), _level(8, [0.3])]
    assert highest_meeting_slo(levels, 250) == 2  # 8 passing after 4 failed is noise, not capacity
    assert highest_meeting_slo(levels, 50) is None
    assert highest_meeting_slo(levels, 1000) == 8
    assert highest_meeting_slo([_level(1, [0.1], errors=1)], 1000) is None  # errors break the SLO


def test_table_has_one_row_per_level():
    lines = format_table([_level(1, [0.1]), _level(2, [0.2])]).splitlines()
    assert "TTFT p50" in lines[0] and set(lines[1]) <= {"-", " "}
    assert lines[2].split()[0] == "1" and lines[3].split()[0] == "2"


def test_svg_is_well_formed_with_series_and_slo_line():
    svg = render_svg([_level(1, [0.1]), _level(2, [0.2]), _level(4, [0.4])], "t <&> x", slo_ttft_ms=300)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}polyline")) == 5
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "TTFT SLO 300 ms" in texts and "t <&> x" in texts and "concurrency" in texts


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "components.loadtest", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "m"], "--base-url"),
        (["--base-url", "http://x", "--model", "m", "--concurrency", "1,zero"], "--concurrency"),
        (["--base-url", "http://x", "--model", "m", "--concurrency", "0"], ">= 1"),
        (["--base-url", "http://x", "--model", "m", "--prompt-tokens", "gauss:1"], "--prompt-tokens"),
        (["--base-url", "http://x", "--model", "m", "--requests", "0"], "--requests"),
        (["--base-url", "http://x", "--model", "m", "--chart", "a.png"], "--chart"),
        (["--base-url", "ftp://x", "--model", "m"], "--base-url"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message):
    proc = _run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_endpoint_exits_1_with_one_line():
    proc = _run("--base-url", f"http://127.0.0.1:{_closed_port()}", "--model", "m")
    assert proc.returncode == 1
    assert "connection refused" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- one streamed request against a fake stream (no server) ------------------------------------

import io  # noqa: E402
import time  # noqa: E402

from endpoint_tools import loadtest  # noqa: E402
from endpoint_tools.openai_client import StreamEvent  # noqa: E402

# vLLM 0.32's mid-stream failure event (vllm/entrypoints/generate/base/serving.py
# create_streaming_error_response: json of ErrorResponse{error: ErrorInfo}), then [DONE].
VLLM_STREAM_ERROR = (
    '{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}'
)


def _chunk(text):
    return json.dumps({"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]})


class _FakeStreamClient:
    """Replays SSE `data:` payloads as Client.stream would, or raises `fail` from stream()."""

    def __init__(self, payloads=(), fail=None):
        self.payloads, self.fail = list(payloads), fail

    def stream(self, path, body, timeout=None):
        if self.fail:
            raise self.fail
        for payload in self.payloads:
            yield StreamEvent(time.perf_counter(), payload)


def _one(payloads):
    req = loadtest.PlannedRequest([1, 2, 3], 3, 4)
    return loadtest.run_one(_FakeStreamClient(payloads), "m", req, time.monotonic() + 30, 30)


def test_a_clean_stream_is_a_success():
    sample = _one([_chunk("a"), _chunk("b"), '{"choices": [], "usage": {"completion_tokens": 2}}', "[DONE]"])
    assert sample.ok and sample.output_tokens == 2 and sample.ttft is not None and len(sample.itl) == 1


@pytest.mark.parametrize(
    "payloads, expected",
    [
        ([_chunk("a"), _chunk("b"), VLLM_STREAM_ERROR, "[DONE]"], "Internal server error (code 500)"),
        ([VLLM_STREAM_ERROR, "[DONE]"], "Internal server error"),
        ([_chunk("a"), '{"object": "error", "message": "engine dead", "code": 500}', "[DONE]"], "engine dead"),
        ([_chunk("a"), '{"error": "overloaded"}', "[DONE]"], "overloaded"),
        ([_chunk("a"), '["not", "an", "object"]', "[DONE]"], "not a JSON object"),
        ([_chunk("a"), '"just a string"', "[DONE]"], "not a JSON object"),
        ([_chunk("a"), "{not json", "[DONE]"], "not valid JSON"),
        # Text that stops without the closing `data: [DONE]` was cut short, not completed.
        ([_chunk("a"), _chunk("b")], "stream ended without data: [DONE]"),
    ],
)
def test_a_stream_that_fails_midway_is_an_error_sample(payloads, expected):
    sample = _one(payloads)
    assert not sample.ok
    assert expected in sample.error


def test_an_exception_in_a_worker_becomes_an_error_sample():
    client = _FakeStreamClient(fail=RuntimeError("boom"))
    planned = [loadtest.PlannedRequest([1], 1, 2) for _ in range(5)]
    progress = loadtest.Progress(len(planned), stream=io.StringIO())
    level = loadtest.run_level(client, "m", 2, planned, time.monotonic() + 30, 30, progress)
    # Every request is accounted for as an error, none lost as "not started" with a dead thread.
    assert level.errors == 5 and level.completed == 0 and level.not_started == 0
    assert level.error_samples == ["client error: RuntimeError: boom"]
    assert progress.done == 5 and progress.errors == 5


@pytest.mark.parametrize("flag", ["--json", "--chart"])
def test_report_paths_are_checked_before_the_sweep(tmp_path, flag):
    # A closed port: exit 2 (usage) rather than 1 (unreachable) proves the path was checked first.
    name = "sweep.json" if flag == "--json" else "sweep.svg"
    missing = tmp_path / "no-such-folder" / name
    proc = _run("--base-url", f"http://127.0.0.1:{_closed_port()}", "--model", "m", flag, str(missing))
    assert proc.returncode == 2, proc.stderr
    assert f"{flag} {missing}: folder {missing.parent} does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr and "connection refused" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("python -m components.loadtest: error:")


def test_output_path_problems(tmp_path):
    assert loadtest.output_path_problem(tmp_path / "ok.json") is None
    assert "is a directory" in loadtest.output_path_problem(tmp_path)
    assert "does not exist" in loadtest.output_path_problem(tmp_path / "a" / "b.json")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
        (["--request-timeout", "nan"], "--request-timeout"),
        (["--slo-ttft-ms", "nan"], "--slo-ttft-ms"),
        (["--base-url", "http://127.0.0.1:99999"], "--base-url http://127.0.0.1:99999: Port out of range"),
        (["--base-url", "http://[::1:8000"], "--base-url http://[::1:8000: Invalid IPv6 URL"),
    ],
)
def test_non_finite_numbers_and_bad_urls_exit_2(args, message):
    base = [] if args[0] == "--base-url" else ["--base-url", "http://x"]
    proc = _run(*base, "--model", "m", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
