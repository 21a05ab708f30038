"""models[].load: requests per second and token lengths, each bounded, refused with the key when inconsistent."""

from __future__ import annotations

import pytest

from stack_config import parse_stack_config
from tests.support.config_edits import base, edit, problems_of

LOAD = {
    "peakRequestsPerSecond": 40,
    "troughRequestsPerSecond": 4,
    "promptTokens": {"mean": 2000, "p95": 6000},
    "outputTokens": {"mean": 300},
}


def test_a_load_is_read_with_its_defaults():
    config = parse_stack_config(edit(base(), "models[0].load", LOAD), "Pulumi.dev.yaml")
    load = config.models[0].load
    assert load is not None
    assert (load.peakRequestsPerSecond, load.troughRequestsPerSecond) == (40, 4)
    assert (load.promptTokens.mean, load.promptTokens.p95, load.outputTokens.p95) == (2000, 6000, None)
    minimal = {"peakRequestsPerSecond": 1, "promptTokens": {"mean": 1}, "outputTokens": {"mean": 1}}
    assert parse_stack_config(edit(base(), "models[0].load", minimal), "x").models[0].load.troughRequestsPerSecond == 0
    assert parse_stack_config(base(), "x").models[0].load is None


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("peakRequestsPerSecond", 0, "models[0].load.peakRequestsPerSecond"),
        ("peakRequestsPerSecond", 100_001, "models[0].load.peakRequestsPerSecond"),
        ("peakRequestsPerSecond", True, "not a number"),
        ("troughRequestsPerSecond", -1, "models[0].load.troughRequestsPerSecond"),
        ("troughRequestsPerSecond", 41, "troughRequestsPerSecond (41) exceeds peakRequestsPerSecond (40)"),
        ("promptTokens.mean", 0, "models[0].load.promptTokens.mean"),
        ("promptTokens.mean", 2**24 + 1, "models[0].load.promptTokens.mean"),
        ("promptTokens.p95", 1000, "p95 (1000) is below mean (2000)"),
        ("outputTokens", {"p95": 10}, "models[0].load.outputTokens.mean"),
        ("extra", 1, "models[0].load.extra"),
    ],
)
def test_a_bad_load_is_one_line_naming_the_key(path, value, message):
    raw = edit(base(), "models[0].load", LOAD)
    problems = problems_of(edit(raw, f"models[0].load.{path}", value))
    assert len(problems) == 1 and message in problems[0], problems
