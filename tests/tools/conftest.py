"""The stand-in registry fixture (tests/support/fuzz/resolver_runs.py), one per test module, imported
here rather than into each test module, where a test's `registry` parameter would read as
redefining the import."""

from tests.support.fuzz.resolver_runs import registry as registry
