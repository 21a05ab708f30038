"""How `make test` spreads the tests over pytest-xdist workers: by module, the real-vLLM folder whole.

A pytest plugin (pytest.ini: `-p tests.support.parallel`), used only when xdist runs (`-n`). Each
test module is one unit of work, so its module-scoped fixtures (a stack evaluation, a fault
server) are built on one worker, not on every worker. Every test in tests/vllm/ is one unit: they
share one real vLLM server per process (tests/vllm/conftest.py), which takes 30-70 s to start, so
they must run in the same worker. The unit with the most tests goes first (xdist's
--loadscope-reorder, on by default), so the vLLM start overlaps the rest of the suite. The modules
that read the committed stacks' plans (support/committed_plans.py) are one unit too, so each plan
is made once per run, not once per worker.

Why not `--dist loadgroup` with an `xdist_group` mark: pytest-xdist 3.8.0 tags a grouped test by
assigning `item._nodeid` (xdist/remote.py, WorkerInteractor.pytest_collection_modifyitems), which
pytest 9.2 no longer reads (`Node.nodeid` returns `self._id`, _pytest/nodes.py), so the groups
silently vanish. A scheduler (`pytest_xdist_make_scheduler`, xdist's documented hook) does not
depend on node ids being rewritten.
"""

from __future__ import annotations

import pytest

REAL_VLLM_FOLDER = "tests/vllm/"
# The modules calling tests/support/committed_plans.py committed_plan (a plan of dev and of prod).
PLAN_READERS = frozenset(
    {
        "tests/offline_plan/test_plan_determinism.py",
        "tests/offline_plan/test_offline_plan.py",
        "tests/offline_plan/test_helm_render.py",
        "tests/offline_plan/test_plan_diff.py",
    }
)
PLAN_READERS_UNIT = "committed plans"


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, the whole real-vLLM folder, or the plan readers."""
    if nodeid.startswith(REAL_VLLM_FOLDER):
        return REAL_VLLM_FOLDER
    module = nodeid.split("::", 1)[0]
    return PLAN_READERS_UNIT if module in PLAN_READERS else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModuleRealVllmTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ByModuleRealVllmTogether(config, log)
