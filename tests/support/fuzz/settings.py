"""How many cases each fuzz property tries: a few in `make test`, many in `make fuzz`.

`make fuzz` sets LLM_SERVING_FUZZ_EXAMPLES (cases per property) and passes --hypothesis-seed, so a
failure replays with the printed seed; the example database is off there, so the seed alone decides
the cases.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES_ENV = "LLM_SERVING_FUZZ_EXAMPLES"
# Survey mode (`make fuzz-survey`): record every failing case in the figures and go on, instead of
# stopping at the first one; for counting what a tree does wrong, not for passing or failing it.
SURVEY_ENV = "LLM_SERVING_FUZZ_SURVEY"


def survey() -> bool:
    return bool(os.environ.get(SURVEY_ENV))


def long_run() -> bool:
    return bool(os.environ.get(EXAMPLES_ENV))


def fuzz_settings(default_examples: int, long_share: float = 1.0) -> settings:
    """`default_examples` in `make test`; in `make fuzz`, LLM_SERVING_FUZZ_EXAMPLES x `long_share`."""
    if long_run():
        return settings(
            max_examples=max(1, int(int(os.environ[EXAMPLES_ENV]) * long_share)),
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        )
    return settings(max_examples=default_examples, deadline=None, suppress_health_check=list(HealthCheck))
