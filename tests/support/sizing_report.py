"""The sizing engine's error on real startup logs, per GPU type, release band and architecture family.

A pytest plugin (loaded by pytest.ini's `-p tests.support.sizing_report`): when a run includes the sizing
tests, the terminal summary gets one section per set (calibration sources, held-out sources) with the
mean absolute error of the KV-cache token count and the share of cases within 5%, overall and per
group, plus whether every run that did not start is predicted as "does not fit". No `-s` needed.

    venv/bin/python -m tests.support.sizing_report     # the same tables without pytest

Every figure is on the project's own collection of logs (its held-out side included: logs this project
found and chose); the first line of the report says so and gives the set's size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

WITHIN = 0.05
SIZING_TEST_FILES = ("test_sizing.py", "test_sizing_by_source.py")


def _stats(errors: list[float]) -> str:
    n = len(errors)
    mae = sum(abs(e) for e in errors) / n
    within = sum(abs(e) <= WITHIN for e in errors) / n
    # The error bar of a group: its errors' range (a group of one has none to speak of).
    bar = f"  range {min(errors):+6.1%} .. {max(errors):+6.1%}" if n > 1 else ""
    return f"{n:>3}  MAE {mae:6.2%}  within 5% {within:6.1%}{bar}"


def table(
    title: str, cases: list[dict], errors: dict[str, float], groupings: Iterable[tuple[str, Callable[[dict], str]]]
) -> list[str]:
    lines = [f"{title}: {_stats(list(errors.values()))}"]
    for name, key in groupings:
        groups: dict[str, list[float]] = defaultdict(list)
        for case in cases:
            if case["id"] in errors:
                groups[key(case)].append(errors[case["id"]])
        lines.append(f"  by {name}:")
        lines += [f"    {group:<22} {_stats(values)}" for group, values in sorted(groups.items())]
    return lines


def report_lines() -> list[str]:
    from tests.support import sizing_cases as sc

    groupings = (
        ("GPU type", sc.gpu_type),
        ("release band", sc.release_band),
        ("architecture family", sc.architecture_family),
    )
    held_sources = len({sc.source_of(c) for c in sc.HELD_OUT})
    lines = [
        # What the figures mean (issue 29): the held-out side is the project's own collection, chosen by
        # the people who wrote the engine, not a set from sources the project has never used.
        (
            f"The held-out split is the project's own collection: {len(sc.HELD_OUT)} logs "
            f"({sum(map(sc.starts, sc.HELD_OUT))} that started) from {held_sources} repositories or sites that no "
            "constant was chosen on (tests/fixtures/vllm_logs/README.md), found and chosen by this project. It is "
            "not an independent set: on 21 logs from sources the project never used, issue 29 reports 4.5% MAE, "
            "12 within 5%."
        ),
    ]
    sets = (
        (f"calibration sources (cases.yaml, {len({sc.source_of(c) for c in sc.CALIBRATION})} sources)", sc.CALIBRATION),
        (f"held-out sources, all cases (held_out_by_source.yaml, {held_sources} sources)", sc.HELD_OUT),
        ("held-out sources within the planner's scope (the goal's set)", [c for c in sc.HELD_OUT if sc.in_scope(c)]),
    )
    for title, cases in sets:
        running = [c for c in cases if sc.starts(c)]
        errors = {c["id"]: sc.relative_error(c) for c in running}
        lines += table(title, running, errors, groupings)
        failed = [c for c in cases if not sc.starts(c)]
        if failed:
            told = [c["id"] for c in failed if not sc.predicted(c).fits]
            lines.append(f"  runs that did not start, predicted 'does not fit': {len(told)} of {len(failed)}")
        worst = sorted(errors.items(), key=lambda item: -abs(item[1]))[:5]
        lines.append("  largest errors: " + ", ".join(f"{cid} {err:+.1%}" for cid, err in worst))
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # pragma: no cover - output only
    ran = {
        report.nodeid.split("::")[0].rsplit("/", 1)[-1]
        for key in ("passed", "failed", "xfailed", "xpassed")
        for report in terminalreporter.stats.get(key, [])
    }
    if not ran & set(SIZING_TEST_FILES):
        return
    terminalreporter.write_sep("-", "sizing error on real vLLM startup logs (KV-cache tokens)")
    for line in report_lines():
        terminalreporter.write_line(line)


if __name__ == "__main__":  # pragma: no cover
    print("\n".join(report_lines()))
