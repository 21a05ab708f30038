"""Statistics and reports of a load sweep: percentiles, the SLO pick, a text table, an SVG chart.

Pure functions over measured numbers, so they are tested without a server.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from html import escape

PERCENTILES = (50, 95, 99)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default ("linear"), so numbers match what people compute in a
    notebook from the JSON output. None for no values: an empty level has no latency, not zero.
    """
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class RequestSample:
    """What one streamed request measured (seconds)."""

    ok: bool
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    latency: float | None = None
    error: str = ""


@dataclass
class LevelResult:
    """One concurrency level's summary; latencies in milliseconds."""

    concurrency: int
    requests: int
    completed: int
    errors: int
    not_started: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    error_samples: list[str]
    ttft_mean_ms: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def summarize(concurrency: int, samples: list[RequestSample], planned: int, duration_s: float) -> LevelResult:
    ok = [s for s in samples if s.ok]
    failed = [s for s in samples if not s.ok]
    ttfts = [s.ttft * 1000 for s in ok if s.ttft is not None]
    # ITL is the gap between streamed chunks (as vLLM's own benchmark measures it). When the server
    # falls behind it sends several tokens in one chunk, so ITL shows 0 ms gaps and long ones; TPOT
    # (time per output token after the first, per request) is the steadier per-token figure.
    itls = [gap * 1000 for s in ok for gap in s.itl]
    tpots = [
        (s.latency - s.ttft) * 1000 / (s.output_tokens - 1)
        for s in ok
        if s.latency is not None and s.ttft is not None and s.output_tokens > 1
    ]
    e2es = [s.latency * 1000 for s in ok if s.latency is not None]
    tokens = sum(s.output_tokens for s in ok)

    def pcts(values: list[float]) -> dict[str, float | None]:
        return {f"p{q}": _round(percentile(values, q)) for q in PERCENTILES}

    # Distinct error messages (a few), so the report says why without repeating one line 50 times.
    seen: list[str] = []
    for s in failed:
        if s.error not in seen and len(seen) < 3:
            seen.append(s.error)
    return LevelResult(
        concurrency=concurrency,
        requests=planned,
        completed=len(ok),
        errors=len(failed),
        not_started=planned - len(samples),
        duration_s=round(duration_s, 3),
        output_tokens=tokens,
        output_tokens_per_s=round(tokens / duration_s, 2) if duration_s > 0 else 0.0,
        requests_per_s=round(len(ok) / duration_s, 3) if duration_s > 0 else 0.0,
        ttft_ms=pcts(ttfts),
        itl_ms=pcts(itls),
        tpot_ms=pcts(tpots),
        e2e_ms=pcts(e2es),
        error_samples=seen,
        ttft_mean_ms=_round(sum(ttfts) / len(ttfts)) if ttfts else None,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def meets_slo(level: LevelResult, slo_ttft_ms: float, stat: str = "p95") -> bool:
    """A level meets the SLO when every request completed and its TTFT statistic is within it."""
    value = level.ttft_ms.get(stat)
    return level.errors == 0 and level.not_started == 0 and value is not None and value <= slo_ttft_ms


def highest_meeting_slo(levels: list[LevelResult], slo_ttft_ms: float, stat: str = "p95") -> int | None:
    """The highest concurrency before the first level (in increasing concurrency) that breaks the SLO.

    Stopping at the first break, rather than taking any passing level, keeps a lucky noisy level
    above a failing one from being reported as safe capacity. None when even the lowest fails.
    """
    best = None
    for level in sorted(levels, key=lambda lv: lv.concurrency):
        if not meets_slo(level, slo_ttft_ms, stat):
            break
        best = level.concurrency
    return best


# -- text table ------------------------------------------------------------------------------------

_COLUMNS = (
    ("conc", lambda lv: str(lv.concurrency)),
    ("ok", lambda lv: f"{lv.completed}/{lv.requests}"),
    ("err", lambda lv: str(lv.errors)),
    ("TTFT p50", lambda lv: _ms(lv.ttft_ms["p50"])),
    ("p95", lambda lv: _ms(lv.ttft_ms["p95"])),
    ("p99", lambda lv: _ms(lv.ttft_ms["p99"])),
    ("ITL p50", lambda lv: _ms(lv.itl_ms["p50"])),
    ("p95", lambda lv: _ms(lv.itl_ms["p95"])),
    ("p99", lambda lv: _ms(lv.itl_ms["p99"])),
    ("TPOT p50", lambda lv: _ms(lv.tpot_ms["p50"])),
    ("out tok/s", lambda lv: f"{lv.output_tokens_per_s:.1f}"),
    ("req/s", lambda lv: f"{lv.requests_per_s:.2f}"),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def format_table(levels: list[LevelResult]) -> str:
    """A fixed-width table, one row per concurrency level (latencies in ms)."""
    rows = [[name for name, _ in _COLUMNS]] + [[fmt(lv) for _, fmt in _COLUMNS] for lv in levels]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- SVG chart -------------------------------------------------------------------------------------

_SERIES = (
    ("TTFT p50", "ttft_ms", "p50", "#1f77b4", ""),
    ("TTFT p95", "ttft_ms", "p95", "#1f77b4", "6,4"),
    ("TTFT p99", "ttft_ms", "p99", "#1f77b4", "2,3"),
    ("ITL p50", "itl_ms", "p50", "#d62728", ""),
    ("ITL p95", "itl_ms", "p95", "#d62728", "6,4"),
)


def _nice_ceiling(value: float) -> float:
    """A round axis maximum at or above value (1, 2, 2.5, 5 x 10^k)."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def render_svg(levels: list[LevelResult], title: str, slo_ttft_ms: float | None = None) -> str:
    """Latency (ms) against concurrency as a self-contained SVG line chart."""
    width, height = 720, 420
    left, right, top, bottom = 70, 150, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    levels = sorted(levels, key=lambda lv: lv.concurrency)
    values = [getattr(lv, attr)[stat] for lv in levels for _, attr, stat, _, _ in _SERIES]
    values = [v for v in values if v is not None] + ([slo_ttft_ms] if slo_ttft_ms else [])
    y_max = _nice_ceiling(max(values) * 1.05 if values else 1.0)
    # Concurrency levels are usually powers of two: evenly spaced categories read better than a
    # linear axis that crowds 1, 2, 4 into a corner.
    n = max(len(levels), 1)

    def x_at(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n)

    def y_at(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
        ),
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for k in range(6):
        v = y_max * k / 5
        y = y_at(v)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="black"/>')
    for i, lv in enumerate(levels):
        out.append(f'<text x="{x_at(i):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{lv.concurrency}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" text-anchor="middle">concurrency</text>')
    out.append(
        f'<text transform="translate(18 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">latency (ms)</text>'
    )
    if slo_ttft_ms:
        y = y_at(slo_ttft_ms)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
            f'stroke="#2ca02c" stroke-width="1.5" stroke-dasharray="8,4"/>'
        )
        out.append(
            f'<text x="{left + plot_w - 4}" y="{y - 5:.1f}" text-anchor="end" fill="#2ca02c">'
            f"TTFT SLO {slo_ttft_ms:g} ms</text>"
        )
    for row, (label, attr, stat, color, dash) in enumerate(_SERIES):
        points = [
            (x_at(i), y_at(getattr(lv, attr)[stat]))
            for i, lv in enumerate(levels)
            if getattr(lv, attr)[stat] is not None
        ]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash_attr}/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
        ly = top + 10 + row * 20
        lx = left + plot_w + 15
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
