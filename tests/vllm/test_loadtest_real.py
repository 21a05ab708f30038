"""A short load sweep against a real vLLM server: table, JSON and SVG."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from tests.support.vllm_server import FIGURES, run_tool

OUTPUT_TOKENS = 16
REQUESTS = 4


def test_short_sweep_reports_every_level(vllm_server, tmp_path):
    report, chart = tmp_path / "sweep.json", tmp_path / "sweep.svg"
    proc = run_tool(
        vllm_server,
        "components.loadtest",
        "--model",
        vllm_server.model,
        "--concurrency",
        "1,2",
        "--requests",
        str(REQUESTS),
        "--prompt-tokens",
        "normal:96,24",
        "--output-tokens",
        f"fixed:{OUTPUT_TOKENS}",
        "--slo-ttft-ms",
        "60000",
        "--timeout",
        "240",
        "--json",
        str(report),
        "--chart",
        str(chart),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    FIGURES.append("load sweep (tiny model on CPU):\n" + proc.stdout.rstrip())

    data = json.loads(report.read_text())
    assert data["prompt_lengths_exact"] is True
    assert [level["concurrency"] for level in data["levels"]] == [1, 2]
    for level in data["levels"]:
        assert level["errors"] == 0 and level["completed"] == REQUESTS
        # ignore_eos makes vLLM produce exactly the sampled output length.
        assert level["output_tokens"] == REQUESTS * OUTPUT_TOKENS
        assert 0 < level["ttft_ms"]["p50"] <= level["ttft_ms"]["p95"] <= level["ttft_ms"]["p99"]
        # On a busy 2-core host vLLM's API server sometimes flushes a whole stream at once, so
        # chunk gaps may read 0 ms; they must be measured, not necessarily positive.
        assert level["itl_ms"]["p50"] >= 0 and level["tpot_ms"]["p50"] >= 0
        assert level["e2e_ms"]["p50"] >= level["ttft_ms"]["p50"] and level["output_tokens_per_s"] > 0
    assert data["slo"]["highest_concurrency_meeting"] == 2
    assert "met up to concurrency 2" in proc.stdout
    assert "TTFT p50" in proc.stdout.splitlines()[0]

    svg = ET.parse(chart).getroot()
    assert svg.tag.endswith("svg")
    assert len(svg.findall(".//{http://www.w3.org/2000/svg}polyline")) >= 3


def test_sweep_stops_at_its_deadline(vllm_server, tmp_path):
    report = tmp_path / "bounded.json"
    planned = 500
    proc = run_tool(
        vllm_server,
        "components.loadtest",
        "--model",
        vllm_server.model,
        "--concurrency",
        "2",
        "--requests",
        str(planned),
        "--prompt-tokens",
        "fixed:32",
        "--output-tokens",
        "fixed:64",
        "--timeout",
        "3",
        "--json",
        str(report),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (level,) = json.loads(report.read_text())["levels"]
    assert level["not_started"] > 0 and level["completed"] > 0
    assert level["completed"] + level["errors"] + level["not_started"] == planned
    assert level["duration_s"] < 10
