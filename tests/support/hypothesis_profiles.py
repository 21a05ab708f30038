"""Property tests give the same verdict on every run of `make test`; fresh cases are `make fuzz`'s job.

A pytest plugin (pytest.ini: `-p tests.support.hypothesis_profiles`). Every run has:
- a fixed seed, printed in the header, unless `--hypothesis-seed` gives another (`make fuzz` draws
  one and prints it). With a seed, Hypothesis starts every test from `Random(seed)`
  (hypothesis/core.py, `global_force_seed`), so the cases do not depend on the order tests run
  in, nor on which xdist worker runs them;
- no example database: a case found on one machine is not silently replayed on the next, and a
  clean checkout behaves as this one. A case worth keeping becomes an `@example` or a test;
- no deadline per example: a loaded 2-core machine must not turn a slow case into a failure. The
  bounds that matter are the tools' own (each fuzz property runs its tool under a time limit).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import core as hypothesis_core

PROFILE = "repeatable"
# Any fixed number does; this one is the date the seed was fixed.
FIXED_SEED = 20261202

settings.register_profile(
    PROFILE, database=None, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(PROFILE)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # After Hypothesis' own plugin, which sets the seed from --hypothesis-seed when it is given.
    if hypothesis_core.global_force_seed is None:
        hypothesis_core.global_force_seed = FIXED_SEED


def pytest_report_header(config: pytest.Config) -> str:
    seed = hypothesis_core.global_force_seed
    origin = "fixed" if seed == FIXED_SEED else "from --hypothesis-seed"
    return (
        f"hypothesis: profile {settings.get_current_profile_name()!r}, seed {seed} ({origin}; replay with "
        f"--hypothesis-seed={seed}), example database off"
    )


def pytest_terminal_summary(terminalreporter) -> None:
    # The header is hidden under -q (as `make test` runs); the seed must be on every log.
    terminalreporter.write_line(pytest_report_header(terminalreporter.config))
