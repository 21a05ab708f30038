"""A region the cloud does not have is refused at config time, with the key, the list's source and a did-you-mean."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from offline_plan import write
from offline_plan.mock_runtime import evaluate_stack
from stack_config import regions
from stack_config.formats import AWS_REGION_RE, GCP_REGION_RE, aws_region_problem, gcp_region_problem
from tests.support import paths


def _plan_with_region(tmp_path: Path, capsys, stack: str, region: str) -> tuple[int, list[str]]:
    doc = yaml.safe_load((paths.ROOT / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["llm-serving:cluster"]["region"] = region
    (tmp_path / "__main__.py").symlink_to(paths.ROOT / "__main__.py")
    (tmp_path / "Pulumi.regions.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    code = write.run("regions", tmp_path / "out", tmp_path)
    return code, capsys.readouterr().err.splitlines()[1:]


@pytest.mark.parametrize(
    "stack, region, meant",
    [("prod", "us-east-9", "'us-east-"), ("prod", "eu-west-7", "'eu-west-"), ("dev", "us-central9", "'us-central1'")],
)
def test_a_region_that_does_not_exist_is_refused_with_the_key_and_a_suggestion(tmp_path, capsys, stack, region, meant):
    code, problems = _plan_with_region(tmp_path, capsys, stack, region)
    assert code == 2
    [line] = [p for p in problems if "cluster.region" in p]
    assert line.startswith(f"  Pulumi.regions.yaml: cluster.region: '{region}' is not a"), line
    assert " region " in line
    assert f"(did you mean {meant}" in line
    assert regions.SOURCES["aws" if stack == "prod" else "gcp"].split(";")[0] in line
    assert "Traceback" not in "\n".join(problems)


def test_a_zone_of_a_region_that_does_not_exist_is_refused_for_an_existing_zonal_cluster():
    assert gcp_region_problem("us-central1-a", zone_allowed=True) is None
    problem = gcp_region_problem("us-central9-a", zone_allowed=True)
    assert problem and problem.startswith("zone 'us-central9-a' is in 'us-central9', which is not a GCP region")


def test_a_deployer_stack_in_a_region_that_does_not_exist_is_refused():
    evaluation = evaluate_stack("prod-deployer", overrides={"region": "us-east-9"}, raise_errors=False)
    assert evaluation.error is not None
    assert "region" in str(evaluation.error) and "'us-east-9' is not an AWS region" in str(evaluation.error)


def test_the_lists_hold_real_region_codes_and_the_committed_stacks_regions():
    for region in regions.AWS_REGIONS:
        assert AWS_REGION_RE.fullmatch(region), region
    for region in regions.GCP_REGIONS:
        assert GCP_REGION_RE.fullmatch(region), region
    for stack in ("dev", "prod", "prod-deployer"):
        text = (paths.ROOT / f"Pulumi.{stack}.yaml").read_text()
        for region in re.findall(r"^\s+(?:llm-serving:)?region: (\S+)", text, re.MULTILINE):
            assert aws_region_problem(region) is None or gcp_region_problem(region) is None, (stack, region)
