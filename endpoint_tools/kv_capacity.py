"""The KV-cache capacity a vLLM server allocated, read from its /metrics, against a prediction.

vLLM exposes the cache it sized as labels of `vllm:cache_config_info` (common/engine_metrics.py).
This module finds those series in a Prometheus text exposition the server may have written badly
or on purpose wrongly, and judges the capacity against the planner's number:

    error = (actual - predicted) / predicted

A server with less capacity than predicted by more than the tolerance fails (the planner promised
concurrency the server cannot hold); one with more passes and says so (the plan is conservative).

Bounds: the exposition is already capped by the HTTP client (32 MiB); here at most
MAX_INFO_SERIES series of the info gauge are read, each line at most MAX_LINE_CHARS, every number
a whole number of at most 15 digits. Anything else is a one-line reason, never an exception.
Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.engine_metrics import BLOCK_SIZE_LABEL, CACHE_CONFIG_INFO, KV_SIZE_TOKENS_LABEL, NUM_GPU_BLOCKS_LABEL
from common.untrusted import excerpt

# One series per engine (data-parallel ranks each have their own); more than this is not a server.
MAX_INFO_SERIES = 64
# A cache_config_info line carries ~20 labels (~1 KB); a longer line is not read.
MAX_LINE_CHARS = 65536
# 10^15 tokens is far beyond any cache; a longer digit string is a lie, not a capacity.
_WHOLE = re.compile(r"[0-9]{1,15}")
# name="value" with the exposition format's escapes (\\, \", \n) inside the quotes.
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class Capacity:
    """What one server reports: its tokens, and how they were read."""

    tokens: int
    how: str  # e.g. "kv_cache_size_tokens" or "num_gpu_blocks x block_size"
    num_blocks: int | None
    block_size: int | None
    engines: int


class CapacityUnreadable(Exception):
    """The exposition does not state a usable capacity; the message says why, in one line."""


def _labels(body: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        match = _LABEL.match(body, pos)
        if match is None:
            raise CapacityUnreadable(
                f"{CACHE_CONFIG_INFO} has labels that do not parse near {excerpt(body[pos : pos + 40])}"
            )
        if match.group(1) in labels:
            # One series cannot carry a label twice (the exposition format's label set is a map): a
            # second num_gpu_blocks would make the capacity whichever the reader keeps.
            raise CapacityUnreadable(f"{CACHE_CONFIG_INFO} sets the label {match.group(1)} twice")
        labels[match.group(1)] = match.group(2)
        pos = match.end()
    return labels


def info_series(metrics_text: str) -> list[dict[str, str]]:
    """The label sets of every `vllm:cache_config_info` sample (comments and other series skipped)."""
    prefix = CACHE_CONFIG_INFO + "{"
    found: list[dict[str, str]] = []
    for line in metrics_text.splitlines():
        if not line.startswith(prefix):
            continue
        if len(line) > MAX_LINE_CHARS:
            raise CapacityUnreadable(
                f"a {CACHE_CONFIG_INFO} line is {len(line):,} characters long (at most {MAX_LINE_CHARS:,} are read)"
            )
        end = line.rfind("}")
        if end < len(prefix) - 1:
            raise CapacityUnreadable(f"a {CACHE_CONFIG_INFO} line has no closing brace: {excerpt(line[:80])}")
        if len(found) == MAX_INFO_SERIES:
            raise CapacityUnreadable(f"more than {MAX_INFO_SERIES} {CACHE_CONFIG_INFO} series")
        found.append(_labels(line[len(prefix) : end]))
    return found


def _whole(labels: dict[str, str], name: str) -> int | None:
    value = labels.get(name)
    if value is None or value in ("", "None"):
        return None  # a release without the label, or a cache not sized yet
    if not _WHOLE.fullmatch(value):
        raise CapacityUnreadable(f"{CACHE_CONFIG_INFO} label {name}={excerpt(value, 40)} is not a whole number")
    return int(value)


def _one(labels: dict[str, str]) -> Capacity:
    tokens = _whole(labels, KV_SIZE_TOKENS_LABEL)
    blocks, block_size = _whole(labels, NUM_GPU_BLOCKS_LABEL), _whole(labels, BLOCK_SIZE_LABEL)
    if tokens is not None:
        how = KV_SIZE_TOKENS_LABEL
    elif blocks is not None and block_size is not None:
        # Releases before kv_cache_size_tokens: pages times their size (exact for plain attention;
        # hybrid models report fewer tokens than this, see planner/kv_layout.reported_tokens).
        tokens, how = blocks * block_size, f"{NUM_GPU_BLOCKS_LABEL} x {BLOCK_SIZE_LABEL}"
    else:
        raise CapacityUnreadable(
            f"{CACHE_CONFIG_INFO} has neither {KV_SIZE_TOKENS_LABEL} nor both "
            f"{NUM_GPU_BLOCKS_LABEL} and {BLOCK_SIZE_LABEL}"
        )
    if tokens <= 0:
        raise CapacityUnreadable(f"{CACHE_CONFIG_INFO} reports {tokens} KV-cache tokens")
    if blocks is not None and block_size is not None and tokens > blocks * block_size:
        # The cache is `blocks` pages of `block_size` tokens; vLLM reports at most that many (fewer for
        # hybrid models, whose groups share the pages), so more is a server contradicting itself.
        raise CapacityUnreadable(
            f"{CACHE_CONFIG_INFO} contradicts itself: {KV_SIZE_TOKENS_LABEL}={tokens:,} is more than "
            f"{NUM_GPU_BLOCKS_LABEL} x {BLOCK_SIZE_LABEL} = {blocks:,} x {block_size} = {blocks * block_size:,}"
        )
    return Capacity(tokens, how, blocks, block_size, 1)


def read_capacity(metrics_text: str) -> Capacity:
    """The server's KV-cache tokens per engine; with several engines (data parallel), the smallest."""
    series = info_series(metrics_text)
    if not series:
        raise CapacityUnreadable(
            f"/metrics has no {CACHE_CONFIG_INFO} (vLLM older than the pinned release, or not a vLLM server)"
        )
    each = [_one(labels) for labels in series]
    least = min(each, key=lambda c: c.tokens)
    return Capacity(least.tokens, least.how, least.num_blocks, least.block_size, len(each))


@dataclass(frozen=True)
class Verdict:
    predicted: int
    actual: int
    error: float  # (actual - predicted) / predicted
    tolerance: float
    passed: bool

    @property
    def shortfall(self) -> bool:
        return not self.passed


def judge(predicted: int, actual: int, tolerance: float = DEFAULT_TOLERANCE) -> Verdict:
    """Fails only when the server holds less than predicted by more than `tolerance` (a fraction)."""
    if predicted <= 0:
        raise ValueError("the predicted KV-cache tokens must be positive")
    if not 0 <= tolerance < 1:
        raise ValueError("the tolerance is a fraction from 0 to below 1")
    error = (actual - predicted) / predicted
    return Verdict(predicted, actual, error, tolerance, passed=error >= -tolerance)


def describe(verdict: Verdict, capacity: Capacity) -> str:
    """One line: predicted, actual, the error, how the actual was read, and what it means."""
    pages = (
        f"; {capacity.num_blocks:,} blocks of {capacity.block_size}"
        if capacity.num_blocks is not None and capacity.block_size is not None
        else ""
    )
    engines = f"; least of {capacity.engines} engines" if capacity.engines > 1 else ""
    text = (
        f"predicted {verdict.predicted:,} KV-cache tokens, actual {verdict.actual:,} ({capacity.how}{pages}"
        f"{engines}), error {verdict.error:+.1%}"
    )
    if not verdict.passed:
        return text + f": below the prediction by more than the {verdict.tolerance:.0%} tolerance"
    if verdict.error > verdict.tolerance:
        return text + f": more than predicted (the plan is conservative by over {verdict.tolerance:.0%})"
    return text + f" (within -{verdict.tolerance:.0%})"
