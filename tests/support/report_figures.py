"""Figures the tests measure, printed at the end of the run whichever process measured them.

A pytest plugin (pytest.ini: `-p tests.support.report_figures`). A test appends a line to a named
section (`section("real vLLM").append(...)`); the terminal summary prints every section. Under
pytest-xdist a worker's lines travel to the controller in `workeroutput` when the worker ends, so
`make test` (parallel) prints the same figures as a plain `pytest` run.
"""

from __future__ import annotations

import json

import pytest

_SECTIONS: dict[str, list[str]] = {}
_WORKER_KEY = "llm_serving_figures"


def section(title: str) -> list[str]:
    """The list of lines printed under `title` at the end of the run."""
    return _SECTIONS.setdefault(title, [])


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_KEY] = json.dumps(_SECTIONS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    for title, lines in json.loads(getattr(node, "workeroutput", {}).get(_WORKER_KEY, "{}")).items():
        section(title).extend(lines)


def pytest_terminal_summary(terminalreporter) -> None:
    for title, lines in sorted(_SECTIONS.items()):
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
