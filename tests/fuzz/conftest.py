"""The fault server fixture (tests/support/fuzz/endpoint_runs.py) and the stand-in registry
(tests/support/fuzz/resolver_runs.py), one per test module, for the tests here that run the
endpoint tools and the digest resolver against them. Imported here rather than into each test module, where
a test's `server` parameter would read as redefining the import."""

from tests.support.fuzz.endpoint_runs import server as server
from tests.support.fuzz.resolver_runs import registry as registry
