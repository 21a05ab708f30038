"""Boot the pack the way the Pulumi CLI does and talk to it over gRPC.

The CLI's python policy plugin runs `python -m pulumi.policy <engine> <pack dir>`, which executes
policies/__main__.py with runpy; PolicyPack then prints its port and serves the Analyzer service.
This catches what unit tests cannot: import paths when run from the pack directory, and policy
metadata (names, levels, config schemas) as the engine receives it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest
from google.protobuf import empty_pb2, json_format
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc

from policies.registry import RULES
from tests.support import paths
from tests.support.policy_engine import load_fixture, struct

ROOT = str(paths.ROOT)


@pytest.fixture(scope="module")
def analyzer(tmp_path_factory):
    # Run from an unrelated directory: the pack must not depend on the caller's cwd.
    cwd = tmp_path_factory.mktemp("elsewhere")
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", os.path.join(ROOT, "policies")],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = proc.stdout.readline().strip()
        assert port.isdigit(), proc.stderr.read() if proc.poll() is not None else port
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_pack_serves_every_rule_with_its_level_and_schema(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == "llm-serving"
    served = {p.name: p for p in info.policies}
    assert set(served) == {r.name for r in RULES}
    for rule in RULES:
        assert served[rule.name].enforcementLevel == proto.MANDATORY
        schema = json_format.MessageToDict(served[rule.name].configSchema.properties)
        assert set(schema) == set(rule.schema)
    budget = json_format.MessageToDict(served["startup-probe-budget"].configSchema.properties)
    assert budget["minimumSeconds"]["type"] == "number"


def test_pack_reports_a_violation_over_grpc(analyzer):
    (obj,) = load_fixture("bad", "gpu-in-limits.yaml")
    request = proto.AnalyzeRequest(
        type="kubernetes:apps/v1:Deployment",
        properties=struct(obj),
        urn="urn:pulumi:dev::llm-serving::kubernetes:apps/v1:Deployment::x",
        name="x",
    )
    response = analyzer.Analyze(request, timeout=30)
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [("gpu-in-limits", proto.MANDATORY)]
    assert "only in resources.requests" in response.diagnostics[0].message
