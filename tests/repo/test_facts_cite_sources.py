"""The product states facts and their sources, never how they were found.

A fact in the repository cites a public source (a URL, a repository path at a tag or commit) or says
plainly that it is unverified and which command settles it. Words about the looking-up itself (an
index's internal ids, the occasion of the work, memory) tell a reader nothing they can check, and they
leak into plan.md through the facts the program prints. This scans every tracked text file.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support import paths

# Each pattern names a way of saying how a fact was found instead of where it is published.
TRACES = {
    "an internal lookup id": re.compile(r"\bfile" + r" id \d{6,}|\bfind_" + r"string\b|\bids? \d{9,}\b"),
    "an index as the source": re.compile(r"\bcode[ -]" + r"index\b|\bsearch " + r"tool\b", re.IGNORECASE),
    "the occasion of the work": re.compile(
        r"\b(?:in |this |that |a later |an earlier )" + r"session\b(?! (?:duration|token|name|tag|policy))",
        re.IGNORECASE,
    ),
    "memory instead of a source": re.compile(r"\bre" + r"called\b|\bnot re-" + r"read\b", re.IGNORECASE),
}
# Files whose text is upstream's, copied with provenance (CRDs, chart values, recorded logs).
UPSTREAM_COPIES = ("tests/fixtures/crds/", "tests/fixtures/helm/", "tests/fixtures/vllm_logs/logs/", "charts/")


def _tracked_text_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=paths.ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    this_file = str(Path(__file__).resolve().relative_to(paths.ROOT))  # its samples are the patterns' own tests
    return [p for p in out.split("\0") if p and not p.startswith(UPSTREAM_COPIES) and p != this_file]


def test_no_file_says_how_a_fact_was_found():
    found = []
    for relative in _tracked_text_files():
        try:
            text = (paths.ROOT / relative).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for what, pattern in TRACES.items():
                if pattern.search(line):
                    found.append(f"{relative}:{number}: {what}: {line.strip()[:120]}")
    assert not found, "cite the public source or mark the fact unverified with its settling command:\n" + "\n".join(
        found
    )


def test_each_pattern_finds_what_it_is_for():
    samples = {
        # Assembled, so this file does not hold the phrases it forbids.
        "an internal lookup id": "config returned by the index (file " + "id 61558565367)",
        "an index as the source": "read in the GitHub code " + "index",
        "the occasion of the work": "not confirmed in this " + "session",
        "memory instead of a source": "re" + "called, not re-" + "read",
    }
    for what, sample in samples.items():
        assert TRACES[what].search(sample), what
    # Credentials have sessions too: those stay.
    assert not TRACES["the occasion of the work"].search("the role session lasts one hour; a session token")
