"""How xdist spreads the tests (tests/support/parallel.py): the units it schedules as one."""

from __future__ import annotations

from tests.support import parallel, paths


def test_the_real_vllm_tests_and_the_plan_readers_are_one_unit_each_and_other_modules_their_own():
    assert parallel.unit_of("tests/vllm/test_smoke_real.py::test_x") == parallel.unit_of("tests/vllm/a.py::b")
    readers = {parallel.unit_of(f"{module}::test_x[dev]") for module in parallel.PLAN_READERS}
    assert readers == {parallel.PLAN_READERS_UNIT}
    assert parallel.unit_of("tests/offline_plan/test_waits.py::test_x") == "tests/offline_plan/test_waits.py"


def test_every_module_reading_a_committed_plan_is_a_plan_reader():
    # A reader outside the unit would make the plans again on another worker (still correct, slower);
    # a listed module that no longer reads one would hold the others up for nothing.
    tests = paths.ROOT / "tests"
    calling = {
        str(path.relative_to(paths.ROOT))
        for path in tests.rglob("test_*.py")
        if path.name != "test_parallel_units.py" and "committed_plan(" in path.read_text(encoding="utf-8")
    }
    assert calling == set(parallel.PLAN_READERS)
